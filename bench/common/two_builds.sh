# Sourced by the benchmarks that compare builds (tune_speed,
# kernel_ab, kernel_order, net_ab, refine); run from the
# repository root.
#
#   bench_release_build SRC BUILD   a Release build of the CLI and the worker
#   bench_base_and_head PREFIX BASE builds git revision BASE (in a worktree)
#                                   and the working tree under a fresh
#                                   $work=/tmp/PREFIX-XXXXXX (removed on exit),
#                                   as $work/base-build and $work/head-build;
#                                   sets base_rev and head_rev (+changes when
#                                   the tree differs from HEAD outside the results folders)
#   bench_run_net EXE DB ARGS...    `EXE run ARGS...` on the records of DB, or, when
#                                   DB is empty, with default configs only (no
#                                   database: a HOME of its own under $work)

bench_release_build() { # SRC BUILD
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DMTGPU_TESTS=OFF >/dev/null
  cmake --build "$2" -j"$(nproc)" --target mtgpu_cli mtgpu_worker >/dev/null
}

bench_cleanup_work() {
  git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true
  rm -rf "$work"
}

bench_base_and_head() { # PREFIX BASE
  work=$(mktemp -d "/tmp/$1-XXXXXX")
  trap bench_cleanup_work EXIT
  git worktree add --detach "$work/base-src" "$2" >/dev/null 2>&1
  bench_release_build "$work/base-src" "$work/base-build"
  bench_release_build . "$work/head-build"
  base_rev=$(git rev-parse --short "$2")
  head_rev="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/*/results/*' || echo +changes)"
}

bench_run_net() { # EXE DB ARGS...
  local exe="$1" db="$2"
  shift 2
  if [ -n "$db" ]; then
    "$exe" run "$@" --db "$db"
  else
    mkdir -p "$work/home"
    env -u MTGPU_DB HOME="$work/home" "$exe" run "$@"
  fi
}
