#!/usr/bin/env bash
# openapi_valid.sh — docs/openapi.yaml against the OpenAPI 3.1 specification's own schema,
# with @seriousme/openapi-schema-validator (the exact tree of tests/openapi/package-lock.json).
# It is installed from the npm registry at test time into $TG_BUILD/openapi-validator (kept
# there for later runs while the lock file is unchanged; never committed). Without node, npm
# or the registry this test fails: it never passes without having validated the document.
set -euo pipefail

: "${TG_SRC:?TG_SRC must point at the repository root}"
: "${TG_BUILD:?TG_BUILD must point at the build directory}"

spec=$TG_SRC/docs/openapi.yaml
pkg=$TG_SRC/tests/openapi
dir=$TG_BUILD/openapi-validator
cli=$dir/node_modules/@seriousme/openapi-schema-validator/bin/validate-api-cli.js
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

die() {
    echo "openapi_valid: FAIL: $*" >&2
    exit 1
}

command -v node >/dev/null 2>&1 || die "node is not installed (scripts/deps installs nodejs)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (scripts/deps installs it)"

# (Re)install when the pinned tree changed or an earlier install did not finish.
if ! cmp -s "$pkg/package-lock.json" "$dir/installed.lock" || [ ! -f "$cli" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$pkg/package.json" "$pkg/package-lock.json" "$dir/"
    echo "openapi_valid: installing the validator into $dir (npm ci)"
    if ! (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --cache "$dir/npm-cache" \
        --fetch-retries=1 --fetch-timeout=60000) >"$tmp/npm.log" 2>&1; then
        cat "$tmp/npm.log" >&2
        die "npm ci failed: the npm registry must be reachable to validate docs/openapi.yaml"
    fi
    cp "$pkg/package-lock.json" "$dir/installed.lock"
fi
version=$(node -p "require('$dir/node_modules/@seriousme/openapi-schema-validator/package.json').version")

validate() { # file -> the validator's JSON verdict on stdout, its exit status
    (cd "$dir" && node "$cli" "$1")
}

rc=0
validate "$spec" >"$tmp/out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] || ! grep -q '"valid": true' "$tmp/out"; then
    cat "$tmp/out" >&2
    die "docs/openapi.yaml is not a valid OpenAPI 3.1 document (validator exit $rc)"
fi

# The validator must also say no to what is wrong, or a pass above would mean nothing:
# an unknown member of an operation, and a reference to a schema that does not exist.
sed 's/^      operationId: evaluate$/      operationIdentifier: evaluate/' "$spec" >"$tmp/bad-member.yaml"
sed "s|'#/components/schemas/DecideResponse'|'#/components/schemas/NoSuchSchema'|" "$spec" \
    >"$tmp/bad-ref.yaml"
for bad in bad-member bad-ref; do
    cmp -s "$spec" "$tmp/$bad.yaml" && die "could not make the $bad copy (docs/openapi.yaml changed shape?)"
    rc=0
    validate "$tmp/$bad.yaml" >"$tmp/out" 2>&1 || rc=$?
    [ "$rc" -ne 0 ] || die "the validator accepted a broken copy ($bad): $(cat "$tmp/out")"
done

echo "openapi_valid: docs/openapi.yaml is valid OpenAPI 3.1" \
    "(@seriousme/openapi-schema-validator $version, node $(node --version))"
