"""Checking mode from Python (docs/contracts.md): pto.Chip(check=True) or
PTO_CHECK=contracts; a kernel that touches memory its task did not declare
raises pto.ContractError whose ``arg`` and ``array`` name the argument."""
import numpy as np
import pytest

import pto


def test_write_into_input_names_the_array():
    a = np.arange(8, dtype=np.float32)
    b = np.ones(8, np.float32)
    y = np.zeros(8, np.float32)
    with pto.Chip(clusters=1, check=True, check_seed=5) as chip:
        add = chip.kernel("add")
        # y is declared INPUT, but "add" writes its third tensor
        with pytest.raises(pto.ContractError) as e:
            chip.run(lambda o: o.submit(add, pto.In(a), pto.In(b), pto.In(y)))
    err = e.value
    assert err.status == "PTO_ECONTRACT" and err.kernel == "add" and err.task == 0
    assert err.arg == 2 and err.array is y
    assert "argument 2 (INPUT" in err.details and "inside its INPUT view" in err.details
    assert "PTO_CHECK_SEED=5 " in err.details


def _accumulate(ctx, a, out):
    out += a  # reads its fresh OUTPUT, which it did not declare as read


def test_undeclared_read_names_the_output_and_the_opt_out():
    a = np.ones(8, np.float32)
    with pto.Chip(clusters=1, check=True) as chip:
        k = chip.kernel(_accumulate, "accumulate")
        with pytest.raises(pto.ContractError) as e:
            chip.run(lambda o: o.submit(k, pto.In(a), pto.New((8,), np.float32)))
    err = e.value
    assert err.arg == 1 and err.array is not None and err.array is not a
    assert "reads memory it did not declare: argument 1's byte" in err.details
    assert "pto_kernel_skip_read_check" in err.details
    # the opt-out: writes still checked, the second run skipped
    with pto.Chip(clusters=1, check=True) as chip:
        k = chip.kernel(_accumulate, "accumulate", read_check=False)
        chip.run(lambda o: o.submit(k, pto.In(a), pto.New((8,), np.float32)))


def test_correct_program_passes_and_env_turns_it_on(monkeypatch):
    monkeypatch.setenv("PTO_CHECK", "contracts")
    a = np.arange(16, dtype=np.float32)
    b = np.full(16, 2.0, np.float32)
    y = np.zeros(16, np.float32)
    with pto.Chip(clusters=2) as chip:
        assert chip.config["check"] == 1
        add = chip.kernel("add")
        st = chip.run(lambda o: o.submit(add, pto.In(a), pto.In(b), pto.Out(y), block_num=2))
    assert st.blocks == 2
    np.testing.assert_array_equal(y, a + b)
    monkeypatch.setenv("PTO_CHECK", "everything")
    with pytest.raises(pto.InvalidArgumentError) as e:
        pto.Chip(clusters=1)
    assert "PTO_CHECK = 'everything', must be 'contracts' or 'off'" in e.value.details


def test_node_runs_refuse_checking_mode(monkeypatch):
    monkeypatch.setenv("PTO_CHECK", "contracts")
    with pytest.raises(pto.InvalidArgumentError) as e:
        pto.Node(1)
    assert "checking mode (PTO_CHECK) does not cover node runs" in e.value.details
