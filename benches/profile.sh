#!/usr/bin/env bash
# benches/profile.sh: what link-time optimisation and codegen units buy the
# packaged binary: build time, binary size and the recorder's CPU per frame.
#
#   benches/profile.sh build [NAME:LTO:CGU ...]   # clean builds, one target dir each
#   benches/profile.sh rig [compare.sh flags]     # one compare.sh run of the builds
#
# build: the source of HEAD (git archive, so edits in the work tree do not
# leak in) is built from nothing for each variant with
# CARGO_PROFILE_RELEASE_LTO / CARGO_PROFILE_RELEASE_CODEGEN_UNITS set,
# `cargo build --release --locked -p wiretape-cli` (what scripts/package.sh
# builds); then one library crate touched and rebuilt (the edit-compile cycle).
# Written to target/profile/builds.csv: variant, lto, cgu, clean build wall
# and CPU seconds (user+sys of cargo and every rustc, cc and linker it ran:
# less sensitive than wall time to other work on the machine), rebuild wall
# and CPU, binary size as built and stripped; the binaries to
# target/profile/bin/wiretape-NAME. Default variants: default (lto=false,
# codegen-units=16: Cargo's release profile), thin (lto="thin", 16) and
# fat (lto="fat", 1).
#
# rig: benches/compare.sh with each binary as a tool of its own (record
# --format pcapng --packet-in-place, compare.sh's `wiretape`) beside the
# generator alone, interleaved in one run; default flags -r 1 -b 300000 (the
# same offered load for every build); the report in target/profile/rig/.
# Run it under `flock` of the rig's lock with nothing else measuring.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/profile
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
mode=${1:-}; shift || true
case $mode in
  build)
    variants=("$@")
    [ ${#variants[@]} -gt 0 ] || variants=(default:false:16 thin:thin:16 fat:fat:1)
    mkdir -p "$OUT/bin"
    src=$OUT/src
    rm -rf "$src"; mkdir -p "$src"
    git archive HEAD | tar -x -C "$src"
    csv=$OUT/builds.csv
    [ -f "$csv" ] || echo "variant,lto,codegen_units,clean_wall_s,clean_cpu_s,rebuild_wall_s,rebuild_cpu_s,bytes,stripped_bytes" > "$csv"
    for v in "${variants[@]}"; do
      IFS=: read -r name lto cgu <<<"$v"
      t=$OUT/target-$name
      rm -rf "$t"
      export CARGO_PROFILE_RELEASE_LTO=$lto CARGO_PROFILE_RELEASE_CODEGEN_UNITS=$cgu
      echo "profile.sh: $name (lto=$lto codegen-units=$cgu): clean build"
      (cd "$src" && /usr/bin/time -f '%e %U %S' -o "$OUT/time-$name" \
        cargo build --release --locked -q -p wiretape-cli --target-dir "$t")
      read -r cw cu cs < "$OUT/time-$name"
      # The edit-compile cycle: a change in the pipeline crate (the recorder's
      # own code), so it and everything above it are compiled and linked again.
      echo "// profile.sh rebuild" >> "$src/crates/pipeline/src/lib.rs"
      (cd "$src" && /usr/bin/time -f '%e %U %S' -o "$OUT/time-$name" \
        cargo build --release --locked -q -p wiretape-cli --target-dir "$t")
      read -r rw ru rs < "$OUT/time-$name"
      sed -i '$d' "$src/crates/pipeline/src/lib.rs"
      cp "$t/release/wiretape" "$OUT/bin/wiretape-$name"
      strip -o "$OUT/bin/wiretape-$name.stripped" "$OUT/bin/wiretape-$name"
      size=$(stat -c %s "$OUT/bin/wiretape-$name"); ssize=$(stat -c %s "$OUT/bin/wiretape-$name.stripped")
      line="$name,$lto,$cgu,$cw,$(awk "BEGIN{print $cu + $cs}"),$rw,$(awk "BEGIN{print $ru + $rs}"),$size,$ssize"
      echo "$line" >> "$csv"
      echo "profile.sh: $line"
      unset CARGO_PROFILE_RELEASE_LTO CARGO_PROFILE_RELEASE_CODEGEN_UNITS
    done
    column -s, -t < "$csv"
    ;;
  rig)
    flags=("$@"); [ ${#flags[@]} -gt 0 ] || flags=(-r 1 -b 300000)
    tools=(none)
    for b in "$OUT"/bin/wiretape-*; do
      case $b in *.stripped) continue ;; esac
      n=${b##*/wiretape-}
      tools+=("cmd:wt-$n=$b record -i {IF} -w {DIR} -q --format pcapng --packet-in-place")
    done
    "$ROOT/benches/compare.sh" "${flags[@]}" -o "$OUT/rig" "${tools[@]}"
    ;;
  *) sed -n '2,26p' "$0"; exit 2 ;;
esac
