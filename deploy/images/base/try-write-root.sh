#!/bin/sh
# A probe for the platform's security tests: what may this container do? It tries to write the
# root filesystem (its top directory, /etc, and $HOME, which its user owns) and to read the
# Kubernetes service account token, and prints one line per attempt and a summary line:
#   summary: uid=1000 root-write=denied etc-write=denied home-write=denied token=absent
# It never prints the token. It exits 0 whatever it finds (it reports, the test decides).
set -u

echo "identity: $(id)"
echo "capabilities: effective $(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)"

try_write() { # label directory
    probe="${2%/}/.gpupaas-write-probe.$$"
    if err=$( (echo probe >"$probe") 2>&1); then
        rm -f "$probe"
        echo "write $2 ($1): ALLOWED (created and removed $probe)"
        eval "$1=allowed"
    else
        echo "write $2 ($1): DENIED (${err##*: })"
        eval "$1=denied"
    fi
}
try_write root_write /
try_write etc_write /etc
try_write home_write "${HOME:-/home/jovyan}"

token=/var/run/secrets/kubernetes.io/serviceaccount/token
if [ -r "$token" ]; then
    echo "service account token: READABLE at $token ($(wc -c <"$token") bytes, not shown)"
    token_state=readable
elif [ -e "$token" ]; then
    echo "service account token: present at $token but not readable"
    token_state=unreadable
else
    echo "service account token: absent ($token does not exist)"
    token_state=absent
fi

echo "summary: uid=$(id -u) root-write=$root_write etc-write=$etc_write" \
    "home-write=$home_write token=$token_state"
