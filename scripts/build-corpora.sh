#!/usr/bin/env bash
# Builds the benchmark corpora in bench/corpora/ (git-ignored), reproducibly, from Debian
# packages pinned by exact version: the same package versions give the same bytes, and
# the script prints each corpus's sha256 to compare with BENCHMARKS.md.
#
#   mixed-27M.txt   the first 27,000,000 bytes of the source stream below, cut back to
#                   the last newline (so it ends on a whole line)
#   mixed-100M.txt  the first 100,000,000 bytes of the same stream, cut the same way
#                   (so mixed-27M.txt is a prefix of mixed-100M.txt)
#   taylorswift.txt minbpe's test text, copied from tests/fixtures or ../shared/data
#   mixed-code-1G.txt  only with CORPUS_1G=1: the whole stream below, then the text files
#                   of the Linux 6.1 source tree (linux-source-6.1, in sorted path order,
#                   those that are valid UTF-8 without NUL bytes), cut back to the last
#                   newline before 1,000,000,000 bytes: about 11% prose in many languages
#                   and 89% C, documentation and build files, like a code-heavy LLM corpus
#
# The stream is plain UTF-8 text in a fixed order: fortune cookies in nine languages
# (English, German, Russian, Chinese, Italian, Czech, Polish, Spanish, Bulgarian), the
# Debian Reference as plain text (11 languages), the Debian Administrator's Handbook in 26
# languages (Arabic, Persian, Greek, Japanese, Korean, Chinese, Russian, Vietnamese, ...)
# with its HTML tags stripped, then translated manual pages (roff source) in Japanese,
# Chinese, Russian, Ukrainian, German, French and Spanish.
#
# Needs: Debian's apt-get (root to run `apt-get update` if the lists lack a version),
# dpkg-deb, perl, gzip, iconv, sha256sum (and xz, tar and ~2.5 GB of scratch disk for
# CORPUS_1G=1). Usage: [CORPUS_1G=1] scripts/build-corpora.sh [OUTDIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/bench/corpora}
WORK=$OUT/.build
DEBS=$WORK/debs
X=$WORK/x
export LC_ALL=C
unset PERL_UNICODE # perl must read and write bytes

# name=version, in stream order. A pinned version that has left the archive makes
# apt-get fail: update the pin, rebuild, and record the new sha256s in BENCHMARKS.md.
PACKAGES=(
  fortunes=1:1.99.1-7.3
  fortunes-de=0.35-1
  fortunes-ru=1.52-3.1
  fortunes-zh=2.98
  fortunes-it=1.99-4.1
  fortunes-cs=2.0.9-1.1
  fortunes-pl=0.0.20130525-3
  fortunes-es=1.36
  fortunes-bg=1.4
  debian-reference-en=2.100
  debian-reference-ja=2.100
  debian-reference-zh-cn=2.100
  debian-reference-de=2.100
  debian-reference-fr=2.100
  debian-handbook=11.20220922
  debian-reference-zh-tw=2.100
  debian-reference-es=2.100
  debian-reference-it=2.100
  debian-reference-pt=2.100
  debian-reference-pt-br=2.100
  debian-reference-id=2.100
  manpages-ja=0.5.0.0.20221215+dfsg-1
  manpages-zh=1.6.4.0-1
  manpages-ru=4.18.1-1
  manpages-uk=4.18.1-1
  manpages-de=4.18.1-1
  manpages-fr=4.18.1-1
  manpages-es=4.18.1-1
)
# The code part of mixed-code-1G.txt (CORPUS_1G=1): bookworm's security updates replace
# this version; a new pin changes that file's sha256 only.
KERNEL=linux-source-6.1=6.1.172-1
# Handbook languages in stream order: English and the non-Latin scripts first, so that
# mixed-27M.txt holds several of them.
HANDBOOK_LANGS=(en-US ar-MA ja-JP ru-RU el-GR ko-KR zh-CN fa-IR zh-TW vi-VN de-DE fr-FR
  es-ES it-IT pt-BR pl-PL cs-CZ tr-TR nl-NL sv-SE da-DK nb-NO ro-RO hr-HR id-ID ca-ES)

# HTML to text, byte-wise and deterministic: drop script/style, drop tags, decode the
# entities the handbook uses, trim trailing blanks and squeeze blank lines; each file's
# text is followed by a newline.
# shellcheck disable=SC2016 # perl code, expanded by perl
HTML2TEXT='for my $f (@ARGV) { open(my $fh, "<", $f) or die "$f: $!\n"; local $/; my $s = <$fh>;
$s =~ s/<(script|style)\b.*?<\/\1>//gis;
$s =~ s/<[^>]*>//gs;
$s =~ s/&#x([0-9a-fA-F]+);/my $c = chr(hex $1); utf8::encode($c); $c/ge;
$s =~ s/&#(\d+);/my $c = chr($1); utf8::encode($c); $c/ge;
my %e = (lt => "<", gt => ">", amp => "&", quot => "\"", apos => "\x27", nbsp => "\xC2\xA0");
$s =~ s/&(lt|gt|amp|quot|apos|nbsp);/$e{$1}/g;
$s =~ s/[ \t]+\n/\n/g; $s =~ s/\n{3,}/\n\n/g; $s =~ s/\A\s+//;
print $s, "\n"; }'
# Files (or stdin) as they are, each ending with a newline.
# shellcheck disable=SC2016
CAT_LINES='@ARGV = ("-") unless @ARGV;
for my $f (@ARGV) { my $fh = \*STDIN; $f eq "-" or open($fh, "<", $f) or die "$f: $!\n";
  local $/; my $s = <$fh>; print $s; print "\n" if length($s) && substr($s, -1) ne "\n"; }'

say() { printf '%s\n' "$*" >&2; }

download() {
  mkdir -p "$DEBS"
  local need=() spec name
  for spec in "${PACKAGES[@]}"; do
    name=${spec%%=*}
    ls "$DEBS/${name}_"*.deb >/dev/null 2>&1 || need+=("$spec")
  done
  [ ${#need[@]} -eq 0 ] && return
  if ! apt-cache show "${need[@]}" >/dev/null 2>&1; then
    say "build-corpora: apt lists lack a pinned version; running apt-get update"
    apt-get update -qq
  fi
  say "build-corpora: downloading ${#need[@]} packages"
  (cd "$DEBS" && apt-get download -qq -o APT::Sandbox::User=root "${need[@]}")
}

# Emits one package's text on stdout; every file's text ends with a newline.

extract() {
  local name=$1 dir=$X/$1 f
  rm -rf "$dir"; mkdir -p "$dir"
  dpkg-deb -x "$DEBS/${name}_"*.deb "$dir"
  case $name in
    fortunes*)
      # The cookie files themselves: not the strfile indexes (.dat), not symlinks.
      find "$dir/usr/share/games/fortunes" -type f ! -name '*.dat' | sort |
        xargs -r -d '\n' perl -e "$CAT_LINES" ;;
    debian-reference-*)
      zcat "$dir"/usr/share/debian-reference/debian-reference.*.txt.gz ;;
    debian-handbook)
      local l
      for l in "${HANDBOOK_LANGS[@]}"; do
        find "$dir/usr/share/doc/debian-handbook/html/$l" -maxdepth 1 -type f -name '*.html' | sort |
          xargs -r -d '\n' perl -e "$HTML2TEXT"
      done ;;
    manpages-*)
      find "$dir/usr/share/man" -type f -name '*.gz' | sort |
        while read -r f; do zcat "$f" | perl -e "$CAT_LINES"; done ;;
    *) say "build-corpora: no extractor for $name"; exit 1 ;;
  esac
}

# Writes the first $2 bytes of stream $1 to $3, cut back to the last newline.
cut_prefix() {
  perl -e 'my $n = shift; binmode STDIN; binmode STDOUT; read(STDIN, my $b, $n) == $n
             or die "build-corpora: the stream has fewer than $n bytes\n";
           $b =~ s/[^\n]*\z//; print $b;' "$2" <"$1" >"$3.tmp"
  mv "$3.tmp" "$3"
}

mkdir -p "$OUT" "$X"
[ "${CORPUS_1G:-}" = 1 ] && PACKAGES+=("$KERNEL")
download
STREAM=$WORK/stream.txt
: >"$STREAM"
for spec in "${PACKAGES[@]}"; do
  name=${spec%%=*}
  [ "$spec" = "$KERNEL" ] && continue
  extract "$name" >>"$STREAM"
  rm -rf "${X:?}/$name"
done
if ! iconv -f UTF-8 -t UTF-8 "$STREAM" >/dev/null 2>&1; then
  say "build-corpora: the stream is not valid UTF-8"; exit 1
fi
say "build-corpora: stream of $(wc -c <"$STREAM") bytes"
cut_prefix "$STREAM" 27000000 "$OUT/mixed-27M.txt"
cut_prefix "$STREAM" 100000000 "$OUT/mixed-100M.txt"
if [ "${CORPUS_1G:-}" = 1 ]; then
  # The kernel tree's text files, sorted by path, each ending with a newline; a file with a
  # NUL byte or invalid UTF-8 is left out.
  name=${KERNEL%%=*}
  dir=$X/$name
  rm -rf "$dir"; mkdir -p "$dir/src"
  dpkg-deb -x "$DEBS/${name}_"*.deb "$dir"
  tar -xJf "$dir"/usr/src/linux-source-6.1.tar.xz -C "$dir/src"
  (cd "$dir/src" && find . -type f | sort) | perl -e '
    binmode STDOUT; my $root = shift; local $/ = "\n";
    while (my $f = <STDIN>) { chomp $f; open(my $fh, "<:raw", "$root/$f") or die "$f: $!\n";
      my $s = do { local $/; <$fh> }; next if !length($s) || $s =~ /\0/;
      my $t = $s; next unless utf8::decode($t);
      print $s; print "\n" if substr($s, -1) ne "\n"; }' "$dir/src" >>"$STREAM"
  rm -rf "$dir"
  cut_prefix "$STREAM" 1000000000 "$OUT/mixed-code-1G.txt"
fi
rm -f "$STREAM"

TS=""
for c in "$ROOT"/tests/fixtures/*/taylorswift.txt "$ROOT"/tests/fixtures/taylorswift.txt \
  "$ROOT/../shared/data/taylorswift.txt" "$ROOT/../../shared/data/taylorswift.txt" \
  /work/shared/data/taylorswift.txt; do
  if [ -f "$c" ]; then TS=$c; break; fi
done
if [ -n "$TS" ]; then cp "$TS" "$OUT/taylorswift.txt"; else say "build-corpora: taylorswift.txt not found"; fi

(cd "$DEBS" && sha256sum ./*.deb) >"$OUT/packages.sha256"
cd "$OUT"
for f in mixed-27M.txt mixed-100M.txt taylorswift.txt mixed-code-1G.txt; do
  if [ -f "$f" ]; then
    printf '%s  %10d  %s\n' "$(sha256sum "$f" | cut -d' ' -f1)" "$(wc -c <"$f")" "$f"
  fi
done | tee SHA256SUMS
