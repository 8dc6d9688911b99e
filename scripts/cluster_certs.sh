#!/bin/sh
# Makes a CA and the certificates mutual TLS needs (docs/CLUSTER.md): DIR/ca.{crt,key}, an agent
# certificate for the addresses given (default: 127.0.0.1 and localhost) and a client
# certificate for the coordinator, each signed by the CA, valid for a year.
#   scripts/cluster_certs.sh DIR [SAN...]     e.g. scripts/cluster_certs.sh pki IP:10.0.0.7 DNS:db7
set -e
dir=$1; shift
[ -n "$dir" ] || { echo "usage: $0 DIR [SAN...]" >&2; exit 2; }
san=$(printf '%s,' "${@:-IP:127.0.0.1}" | sed 's/,$//')
[ $# -eq 0 ] && san="IP:127.0.0.1,DNS:localhost"
mkdir -p "$dir" && cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=fay cluster CA" \
  -keyout ca.key -out ca.crt
for who in agent client; do
  openssl req -newkey rsa:2048 -nodes -subj "/CN=fay $who" -keyout $who.key -out $who.csr
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > $who.ext
  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
    -extfile $who.ext -out $who.crt
  rm -f $who.csr $who.ext
done
