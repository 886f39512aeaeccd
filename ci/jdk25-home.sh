#!/usr/bin/env bash
# Prints the home of the JDK that builds nccl4j's Java 22+ classes and runs the deny-mode tier (ci/jdk25-deny.sh):
#   1. NCCL4J_JDK25_HOME when set (it must be a JDK 23 or later: 23 is the first with
#      --sun-misc-unsafe-memory-access);
#   2. else the newest JDK 23+ (java and javac) among JAVA_HOME, the java on PATH, and the JDKs under /usr/lib/jvm
#      (Debian's and the Temurin packages' place), /usr/java, /opt, /opt/java, /usr/local, ~/.sdkman/candidates/java
#      and ~/.jdks;
#   3. else, with --install (CI passes it), the newest of Debian's openjdk-{25,24,23}-jdk-headless that apt knows,
#      installed with apt-get; an install that apt offers and that fails is an error (exit 3), said loudly.
# Exits 1, printing nothing on standard output and why on standard error, when there is none and none could be
# installed (Debian 12's packages stop at Java 17: there a machine without a JDK 25 of its own finds nothing).
set -euo pipefail

install=false
[ "${1:-}" = --install ] && install=true

feature() { # the feature release of the java at $1, or nothing
  "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p'
}

if [ -n "${NCCL4J_JDK25_HOME:-}" ]; then
  f="$(feature "$NCCL4J_JDK25_HOME/bin/java" 2>/dev/null || true)"
  if [ -z "$f" ] || [ "$f" -lt 23 ] || [ ! -x "$NCCL4J_JDK25_HOME/bin/javac" ]; then
    echo "ci/jdk25-home.sh: NCCL4J_JDK25_HOME=$NCCL4J_JDK25_HOME is not a JDK 23 or later (java.specification.version: ${f:-none})" >&2
    exit 1
  fi
  echo "$NCCL4J_JDK25_HOME"
  exit 0
fi

# newest_jdk: the newest JDK 23+ among the candidates, by their real paths (a link and its target count once).
newest_jdk() {
  local candidates=() home real f best="" best_f=0
  [ -n "${JAVA_HOME:-}" ] && candidates+=("$JAVA_HOME")
  if command -v java >/dev/null 2>&1; then
    candidates+=("$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")")
  fi
  for home in /usr/lib/jvm/*/ /usr/java/*/ /opt/*/ /opt/java/*/ /usr/local/*/ "${HOME:-/nonexistent}"/.sdkman/candidates/java/*/ \
      "${HOME:-/nonexistent}"/.jdks/*/; do
    candidates+=("${home%/}")
  done
  local seen=" "
  for home in "${candidates[@]}"; do
    [ -x "$home/bin/java" ] && [ -x "$home/bin/javac" ] || continue
    real="$(readlink -f "$home")"
    case "$seen" in *" $real "*) continue ;; esac
    seen="$seen$real "
    f="$(feature "$real/bin/java" 2>/dev/null || true)"
    if [ -n "$f" ] && [ "$f" -ge 23 ] && [ "$f" -gt "$best_f" ]; then
      best="$real"
      best_f="$f"
    fi
  done
  [ -n "$best" ] && echo "$best"
}

if best="$(newest_jdk)"; then
  echo "$best"
  exit 0
fi

if $install && command -v apt-get >/dev/null 2>&1; then
  for v in 25 24 23; do
    pkg="openjdk-$v-jdk-headless"
    if [ -z "$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ]; then
      # apt's lists may be missing or old on a new machine: read them once before giving up on the package.
      if [ -z "${updated:-}" ]; then
        apt-get update -qq >/dev/null 2>&1 || true
        updated=1
      fi
      [ -n "$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)')" ] || continue
    fi
    echo "ci/jdk25-home.sh: no JDK 23 or later here; installing Debian's $pkg" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >&2; then
      echo "ci/jdk25-home.sh: ERROR: apt offers $pkg but installing it failed" >&2
      exit 3
    fi
    if best="$(newest_jdk)"; then
      echo "$best"
      exit 0
    fi
    echo "ci/jdk25-home.sh: ERROR: $pkg installed, yet no JDK 23 or later was found under /usr/lib/jvm" >&2
    exit 3
  done
fi

echo "ci/jdk25-home.sh: no JDK 23 or later found (NCCL4J_JDK25_HOME, JAVA_HOME, PATH, /usr/lib/jvm, /usr/java, /opt, /usr/local, ~/.sdkman, ~/.jdks)$($install && echo ', and apt offers none of openjdk-{25,24,23}-jdk-headless')" >&2
exit 1
