"""Checking mode from Python (docs/contracts.md): pto.Chip(check=True) or
PTO_CHECK=contracts; a kernel that touches memory its task did not declare
raises pto.ContractError whose ``arg`` and ``array`` name the argument."""
import numpy as np
import pytest

import pto
from conftest import DEVICE_IDS


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


def _host_copy(ctx, x, out):
    out[:] = x
    if ctx.scalars[0]:  # the element after out[0], between the elements of a strided view
        np.lib.stride_tricks.as_strided(out, shape=(2,), strides=(out.itemsize,))[1] = 7


def _host_peek(ctx, x, out):
    """out = x + the element after x's row (x[1, 0]), which it does not declare."""
    out[:] = x + np.lib.stride_tricks.as_strided(x, shape=(9,), strides=(x.itemsize,))[8]


def _store_to_peer(ctx, x, dst):
    """Stores x into the peer's copy of dst (this rank's InOut window view)."""
    dom = ctx.scalars[0]
    ctx.remote_store(dom, (ctx.rank(dom) + 1) % 2, dst, x)


def _node_breach(node):
    """Runs a correct program, then a host task that writes between the
    elements of its Out view (a column); returns what the ContractError said
    (no array outlives the call)."""
    x = node.host_array((2, 8))
    y = node.host_array((2, 8))
    x[:] = np.arange(16, dtype=np.float32).reshape(2, 8) + 1
    col = y[:, 0]

    def correct(no):  # a host task and a remote store into declared windows
        dom = no.domain([0, 1], {"dst": 32})
        w = [pto.InOut(no.window(dom, r, "dst", np.float32, 8)) for r in range(2)]
        no.submit_group([0, 1], node.kernels["store"], [[pto.In(x[r]), w[r]] for r in range(2)],
                        scalars=[dom])
        no.submit_host("copy", pto.In(x[1]), pto.Out(y[1]), scalars=[0])

    node.run(correct)
    np.testing.assert_array_equal(y[1], x[1])
    with pytest.raises(pto.ContractError) as e:
        node.run(lambda no: no.submit_host("copy", pto.In(x[0, :2]), pto.Out(col), scalars=[1]))
    err = e.value
    return err.status, err.kernel, err.arg, err.array is col, err.details


def test_node_host_task_breach_names_the_array(monkeypatch):
    monkeypatch.setenv("PTO_CHECK", "contracts")
    with pto.Node(2, {"store": _store_to_peer}, host_fns={"copy": _host_copy}, nworkers=1,
                  device_ids=DEVICE_IDS["contracts"], clusters=1, quiet=True) as node:
        status, kernel, arg, is_col, details = _node_breach(node)
    assert status == "PTO_ECONTRACT" and kernel is None
    assert arg == 1 and is_col
    assert "(host task on worker 0) wrote outside its declared writes: argument 1" in details
    # y[0, 1] = 7.0f (00 00 e0 40) first changes at byte 2 of y[0, 1], byte 6 of the column's span
    assert "byte 6 changed 0x00 -> 0xe0, outside its OUTPUT_EXISTING/INOUT views" in details


def test_node_host_task_undeclared_read_names_the_array(monkeypatch):
    monkeypatch.setenv("PTO_CHECK", "contracts")
    with pto.Node(2, host_fns={"peek": _host_peek}, nworkers=1,
                  device_ids=DEVICE_IDS["contracts"], clusters=1, quiet=True) as node:
        x = node.host_array((2, 8))
        y = node.host_array((8,))
        x[:] = np.arange(16, dtype=np.float32).reshape(2, 8) + 1
        with pytest.raises(pto.ContractError) as e:
            node.run(lambda no: no.submit_host("peek", pto.In(x[0]), pto.Out(y)))
        err = e.value
        assert err.status == "PTO_ECONTRACT" and err.kernel is None
        assert err.arg == 1 and err.array is y
        # y[0] = 1 + 9 = 10.0f (00 00 20 41); with x[1, 0] flipped, byte 2 comes out 0x08
        assert ("host worker 0, node task 0: Python host function 'peek' reads memory it did "
                "not declare: argument 1's byte 2 came out 0x20, but 0x08 when every byte of "
                "node host memory outside its views was flipped" in err.details)
        assert "opts out with submit_host(..., read_check=False)" in err.details
        np.testing.assert_array_equal(y, x[0] + 9)  # as the real run left it
        y[:] = 0
        node.run(lambda no: no.submit_host("peek", pto.In(x[0]), pto.Out(y), read_check=False))
        np.testing.assert_array_equal(y, x[0] + 9)
        del x, y, err, e
