#!/usr/bin/env bash
# Make this machine ready: Java 17+, Python 3.11+, .venv with the pinned packages.
# Called by `make setup` (and so by `make run` / `make test`) when .venv is missing
# or pyproject.toml / constraints.txt changed. `setup.sh browser` (run by
# `make test`) only makes sure Chromium and its driver are there, for the docs test.
set -euo pipefail
cd "$(dirname "$0")/.."

# Install Debian packages when root with apt; else return 1 (the caller names the fix).
apt_install() {
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
        return 0
    fi
    return 1
}

java_major() {
    java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

ensure_java() {
    if command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ] 2>/dev/null; then
        return
    fi
    # A JAVA_HOME of Java 17+ will do where PATH holds none or an older one: Spark's
    # launcher runs $JAVA_HOME/bin/java when JAVA_HOME is set.
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ] \
        && [ "$(PATH="$JAVA_HOME/bin:$PATH" java_major)" -ge 17 ] 2>/dev/null; then
        return
    fi
    echo "==> Java 17+ not found; installing openjdk-17-jre-headless with apt (when root)"
    if apt_install openjdk-17-jre-headless; then
        return
    fi
    echo "ERROR: Spark 4 needs Java 17 or newer, and none was found on PATH or in JAVA_HOME." >&2
    echo "Fix: install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless)," >&2
    echo "or set JAVA_HOME to a Java 17+ installation, then run make again." >&2
    exit 1
}

ensure_python() {
    PYTHON=${PYTHON:-python3}
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        echo "ERROR: pyspark 4.3 needs Python 3.11 or newer; '$PYTHON' is $("$PYTHON" --version 2>&1)." >&2
        echo "Fix: install Python 3.11+ and run: make PYTHON=/path/to/python3.11 run" >&2
        exit 1
    fi
}

ensure_browser() {
    if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
        return
    fi
    echo "==> Chromium not found; installing chromium and chromium-driver with apt (when root)"
    if apt_install chromium chromium-driver; then
        return
    fi
    echo "ERROR: the docs-site test needs Chromium and chromedriver, and none was found on PATH." >&2
    echo "Fix: sudo apt-get install chromium chromium-driver (Debian/Ubuntu), then run make test again." >&2
    exit 1
}

if [ "${1:-}" = browser ]; then
    ensure_browser
    exit 0
fi

ensure_java
ensure_python
if [ ! -x .venv/bin/python ]; then
    echo "==> Creating .venv"
    "$PYTHON" -m venv .venv
fi
echo "==> Installing pinned packages into .venv (the first time builds pyspark: a few minutes)"
.venv/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
touch .venv/.setup-done
echo "==> Setup done"
