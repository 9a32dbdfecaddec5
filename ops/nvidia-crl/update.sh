#!/usr/bin/env bash
# Fetches NVIDIA's device-identity CRLs into this folder (run when a release is cut; needs network
# access to crl.ndis.nvidia.com and openssl). The node verifies each CRL's signature itself when it
# loads it; this script only fetches, checks that each file parses as a CRL, and prints its dates.
set -euo pipefail
cd "$(dirname "$0")"
for name in l1-root l2-gh100; do
  curl --fail --silent --show-error --max-time 30 -o "$name.crl.tmp" "http://crl.ndis.nvidia.com/crl/$name.crl"
  openssl crl -inform DER -in "$name.crl.tmp" -noout -issuer -lastupdate -nextupdate
  mv "$name.crl.tmp" "$name.crl"
done
