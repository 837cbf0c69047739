# The result protocol, for tests/vm/init and the scenarios (decoded by
# tests/vm/check.py unpack): send_out NAME sends /out/NAME to the host as a
# gzip'ed tar in base64 between "@@udamon-out-begin NAME" and
# "@@udamon-out-end NAME BYTES", on the results port, which init opens on
# fd 3 and every scenario inherits. A later block of the same name
# overwrites what an earlier one brought.
send_out() {
    tar -C /out -czf /tmp/send-out.tgz "$1" 2>/dev/null
    sz=$(wc -c < /tmp/send-out.tgz)
    {
        echo "@@udamon-out-begin $1"
        base64 /tmp/send-out.tgz
        echo "@@udamon-out-end $1 $sz"
    } >&3
    rm -f /tmp/send-out.tgz
}
