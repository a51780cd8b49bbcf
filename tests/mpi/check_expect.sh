# check_expect.sh — sourced by cli_check.sh and cli_check_two_hosts.sh: what
# `pto run SCENE --check` prints under mpirun, chip 0 breaching into rank 1.
# check_want SCENE: the grep pattern its output must match (a correct
# scene: its verification line).
check_want() {
  case $1 in
  err_contract_remote_store)
    echo "chip rank 0, node task 0: .*remote_store to rank 1 of domain 1: buffer 'dst' byte 128 is outside the node task's window targets (0x00, would be 0x31)" ;;
  err_contract_remote_load)
    echo "chip rank 0, node task 0: .*remote_load from rank 1 of domain 1: buffer 'stage' byte 128 (0x00) is outside every view of the node task" ;;
  err_contract_signal)
    echo "chip rank 0, node task 0: .*notify to rank 1 of domain 1: signal cell 'sig'\[1\] (byte 8) is outside the node task's window targets (an add of 1)" ;;
  *) echo "verified: matches the sequential reference" ;;
  esac
}
