"""Several chips (pto.Node): the dist scenes in Python, in-kernel comm
operations and collectives from Python kernels, node-level collectives."""
import os
import time

import numpy as np
import pytest

import pto
from close_first import env as close_first_env
from conftest import DEVICE_IDS, assert_array

SIZE, HALF = 64, 32
ROUNDS = int(os.environ.get("PTO_PY_SCENE_ROUNDS", "200"))


def node_opts(ids, fault=False, seed=0):
    return dict(device_ids=ids, clusters=2, schedulers=1, task_slots=256, heap_bytes=1 << 20,
                host_bytes=4 << 20, window_space=64 << 20, startup_timeout_ms=30000,
                control_timeout_ms=10000, wait_timeout_ms=5000, lease_wait_ms=60000,
                fault_inject=fault, fault_seed=seed, quiet=True)


# ---- the kernels (defined before any Node: the chip processes are forks) ----
def ring_shuffle(ctx, inp, dst, sig, out):
    """Scene 1: store my input into the next rank's dst, notify, wait, read mine."""
    dom = ctx.scalars[0]
    peer = (ctx.rank(dom) + 1) % 2
    ctx.remote_store(dom, peer, dst, inp)
    ctx.notify(dom, peer, sig, 1, op="add")
    ctx.wait(dom, sig, 1, cmp="ge")
    out[:] = dst


def subview_halves(ctx, inp, dst, sig, out):
    """Scene 2: push my low half into the peer's dst[0:32], the high half into dst[32:64]."""
    dom = ctx.scalars[0]
    peer = (ctx.rank(dom) + 1) % 2
    for h in range(2):
        ctx.remote_store(dom, peer, dst[h * HALF:(h + 1) * HALF], inp[h * HALF:(h + 1) * HALF])
    ctx.notify(dom, peer, sig, 1, op="set")
    ctx.wait(dom, sig, 1, cmp="ge")
    out[:] = dst


def pair_scene(kernel_name, ids, fault, seed, rounds):
    """Runs a 2-chip scene `rounds` times; io like examples/scenes/dist_scene.h."""
    with pto.Node(2, {"ring_shuffle": ring_shuffle, "subview_halves": subview_halves},
                  **node_opts(ids, fault, seed)) as node:
        inp = node.host_array((2, SIZE))
        inp[:] = np.arange(SIZE) + 100 * np.arange(2)[:, None]
        out = node.host_array((2, SIZE))
        k = node.kernels[kernel_name]

        def orch(no):
            dom = no.domain([0, 1], {"dst": SIZE * 4, "sig": 8})
            args = [[pto.In(inp[r]), pto.InOut(no.window(dom, r, "dst", np.float32, SIZE)),
                     pto.InOut(no.window(dom, r, "sig", np.int64, 1)), pto.Out(out[r])]
                    for r in range(2)]
            no.submit_group([0, 1], k, args, scalars=[dom])

        want = {"ring_shuffle": inp[::-1].copy(),
                "subview_halves": inp[::-1].copy()}[kernel_name]
        for rnd in range(rounds):
            out[:] = 0
            node.run(orch)
            assert_array(out, want, f"{kernel_name} round {rnd} (fault injection "
                         f"{'on' if fault else 'off'}, seed {seed}) out")
        inp = out = None  # Node.close refuses while host arrays live


@pytest.mark.parametrize("fault", [False, True], ids=["faults_off", "faults_on"])
@pytest.mark.parametrize("scene", ["ring_shuffle", "subview_halves"])
def test_dist_scene(scene, fault):
    pair_scene(scene, DEVICE_IDS["scenes"], fault, 7919 if fault else 0, ROUNDS)


def comm_ops(ctx, inp, a, b, c, sig, out):
    dom = ctx.scalars[0]
    r = ctx.rank(dom)
    peer = 1 - r
    assert ctx.size(dom) == 2 and ctx.chip == r
    b[:] = inp * 10
    ctx.put(dom, peer, a, inp, chunk_cols=16)
    ctx.remote_store_add(dom, peer, c, np.ones(8, np.float32))
    ctx.notify(dom, peer, sig, 1, op="set")
    ctx.wait(dom, sig, 1, cmp="eq")
    assert ctx.signal_read(dom, sig) == 1
    ctx.barrier(dom)
    got = np.zeros(SIZE, np.float32)
    ctx.get(dom, peer, got, b)
    part = np.zeros(8, np.float32)
    ctx.remote_load(dom, peer, part, b[8:16])
    ctx.quiet(dom)
    out[0:64], out[64:128], out[128:136], out[136:144] = a, got, part, c


def coll_kernel(ctx, inp, scratch, out):
    dom = ctx.scalars[0]
    ar = np.zeros(SIZE, np.float32)
    ctx.allreduce(dom, scratch, ar, inp, op="sum")
    ag = np.zeros((2, SIZE), np.float32)
    ctx.allgather(dom, scratch, ag, inp)
    bc = np.zeros(SIZE, np.float32)
    ctx.broadcast(dom, scratch, bc, inp if ctx.rank(dom) == 1 else None, root=1)
    mx = np.zeros(SIZE, np.float32)
    ctx.allreduce(dom, scratch, mx, inp, op="max", algo="ring")
    out[0], out[1:3], out[3], out[4] = ar, ag, bc, mx


def bad_remote(ctx, t):
    dom = ctx.scalars[0]
    ctx.remote_store(dom, 1 - ctx.rank(dom), np.zeros(4, np.float32), t)  # dst not in a window


def raises_in_child(ctx, t):
    raise RuntimeError("a bug in a chip process")


def host_scale(ctx, x, y):
    """A host sub-worker function: y = x * scalar 0; x is read-only here."""
    assert not x.flags.writeable
    y[:] = x * ctx.scalars[0]


def host_raises(ctx):
    raise OSError("host worker bug")


def commute_add(ctx, acc, inside):
    """acc (Commute) += scalar 0, counting itself in inside[0] (NoDep, host
    memory the chips share) and the most it saw in inside[1]: read, sleep,
    write, so two tasks inside at once show."""
    inside[0] += 1
    inside[1] = max(inside[1], inside[0])
    time.sleep(0.002)
    acc[0] += ctx.scalars[0]
    inside[0] -= 1


def commute_meet(ctx, half, flags):
    """Two Commute tasks on disjoint halves: each waits until the other has
    started (flags, NoDep); 10 s later it gives up and says so in flags[2]."""
    me = ctx.scalars[0]
    flags[me] = 1
    deadline = time.monotonic() + 10
    while not flags[1 - me]:
        if time.monotonic() > deadline:
            flags[2] = 1
            return
        time.sleep(0.0005)


def per_rank_modes(ctx, t):
    """Chip 0 was given its tensor as In, chip 1 as Out: a view read-only
    exactly where the task only reads."""
    if ctx.chip == 0:
        assert not t.flags.writeable, "chip 0's In view is writable"
    else:
        t[:] = 7


def hold_chip(ctx, idle):
    """Keeps its chip busy for a second (idle: NoDep, untouched)."""
    time.sleep(1.0)


def copy_kernel(ctx, src, out):
    out[:] = src


@pytest.fixture(scope="module")
def node(ckernels):
    with pto.Node(2, {"comm_ops": comm_ops, "coll": coll_kernel, "raises": raises_in_child,
                      "add": "add", "bad_remote": bad_remote, "axpb": pto.c_kernel(ckernels, "k_axpb"),
                      "commute_add": commute_add, "commute_meet": commute_meet,
                      "per_rank_modes": per_rank_modes},
                  host_fns={"scale": host_scale, "raises": host_raises}, nworkers=1,
                  **node_opts(DEVICE_IDS["node"])) as n:
        yield n


def test_comm_ops_from_python_kernels(node):
    inp = node.host_array((2, SIZE))
    inp[:] = np.arange(SIZE) + 100 * np.arange(2)[:, None]
    out = node.host_array((2, 144))

    def orch(no):
        dom = no.domain([0, 1], {"a": SIZE * 4, "b": SIZE * 4, "c": 32, "sig": 8})
        w = lambda r, name, dt, n: pto.InOut(no.window(dom, r, name, dt, n))
        args = [[pto.In(inp[r]), w(r, "a", np.float32, SIZE), w(r, "b", np.float32, SIZE),
                 w(r, "c", np.float32, 8), w(r, "sig", np.int64, 1), pto.Out(out[r])]
                for r in range(2)]
        no.submit_group([0, 1], node.kernels["comm_ops"], args, scalars=[dom])
        no.wait_all()
        assert_array(no.read(no.window(dom, 0, "a", np.float32, SIZE)), inp[1], "window a of 0")

    node.run(orch)
    for r in range(2):
        p = 1 - r
        want = np.concatenate([inp[p], inp[p] * 10, inp[p][8:16] * 10, np.ones(8)])
        assert_array(out[r], want.astype(np.float32), f"rank {r} out")


def test_collectives_from_python_kernels(node):
    inp = node.host_array((2, SIZE))
    inp[:] = np.arange(SIZE) + 100 * np.arange(2)[:, None]
    out = node.host_array((2, 5, SIZE))
    sb = pto.coll_scratch_bytes(2, 2 * SIZE * 4)

    def orch(no):
        dom = no.domain([0, 1], {"scratch": sb})
        args = [[pto.In(inp[r]), pto.InOut(no.window(dom, r, "scratch", np.uint8, sb)),
                 pto.Out(out[r])] for r in range(2)]
        no.submit_group([0, 1], node.kernels["coll"], args, scalars=[dom])

    node.run(orch)
    want = np.stack([inp[0] + inp[1], inp[0], inp[1], inp[1], np.maximum(inp[0], inp[1])])
    for r in range(2):
        assert_array(out[r], want, f"rank {r} collectives")


def test_node_level_collectives_and_ref_kernel(node):
    src = node.host_array((2, SIZE))
    src[:] = np.arange(SIZE) * (1 + np.arange(2)[:, None])
    dst = node.host_array((2, SIZE))
    y = node.host_array((2, SIZE))

    def orch(no):
        dom = no.domain([0, 1], {"scratch": pto.coll_scratch_bytes(2, SIZE * 4)})
        no.allreduce(dom, "scratch", [dst[0], dst[1]], [src[0], src[1]], op="sum")
        # a reference kernel on each chip, after the allreduce (dependency on dst)
        no.submit(0, node.kernels["add"], pto.In(dst[0]), pto.In(src[0]), pto.Out(y[0]))
        no.submit(1, node.kernels["add"], pto.In(dst[1]), pto.In(src[1]), pto.Out(y[1]))

    node.run(orch)
    total = src[0] + src[1]
    assert_array(dst, np.stack([total, total]), "allreduce dst")
    assert_array(y, np.stack([total + src[0], total + src[1]]), "add after allreduce")


def test_c_kernel_on_node_chips(node):
    x = node.host_array((2, 16))
    x[:] = np.arange(32).reshape(2, 16)
    y = node.host_array((2, 16))
    node.run(lambda no: no.submit_group([0, 1], node.kernels["axpb"],
                                        [[pto.In(x[r]), pto.Out(y[r])] for r in range(2)],
                                        scalars=[1.5], block_num=2))
    assert_array(y, x * 1.5, "y")


def test_host_sub_worker_tasks(node):
    x = node.host_array(16)
    y = node.host_array(16)
    z = node.host_array(16)

    def orch(no):  # chip, host worker, chip: each waits for the one before
        no.submit(1, node.kernels["axpb"], pto.In(z), pto.Out(x), scalars=[5.0])  # x = 5 z
        no.submit_host("scale", pto.In(x), pto.Out(y), scalars=[3])              # y = 3 x
        no.submit(0, node.kernels["add"], pto.In(y), pto.In(y), pto.Out(z))      # z = 2 y

    z[:] = 1
    node.run(orch)
    assert_array(np.stack([x, y, z]), np.stack([np.full(16, v, np.float32) for v in (5, 15, 30)]),
                 "x, y, z after the chain")
    x[:] = np.arange(16)
    node.run(lambda no: no.submit_host(node.host_fns["scale"], pto.In(x), pto.Out(y),
                                       scalars=[2], worker=0))
    assert_array(y, np.arange(16, dtype=np.float32) * 2, "y")
    # the exception's type and text end the details (before: "host task
    # returned -15", the text only on the worker's stderr)
    with pytest.raises(pto.KernelError, match="host task returned -15: OSError: host worker bug"):
        node.run(lambda no: no.submit_host("raises"))
    with pytest.raises(pto.InvalidArgumentError, match="no host function 'nope'"):
        node.run(lambda no: no.submit_host("nope"))
    with pytest.raises(pto.InvalidArgumentError):
        node.run(lambda no: no.submit_host("scale", pto.In(x), pto.Out(y), worker=3))


def test_python_kernel_views_follow_each_ranks_modes(node):
    """A group task whose chips take their tensors in different modes: each
    chip's Python kernel gets its own tensors' modes. Before, every chip
    used chip 0's (one hidden mask for the task): chip 1's Out view was
    read-only, so a valid task failed (and an In of chip 1 under an Out of
    chip 0 was writable, a write dependency inference did not know of)."""
    t = node.host_array((2, 4))
    node.run(lambda no: no.submit_group([0, 1], node.kernels["per_rank_modes"],
                                        [[pto.In(t[0])], [pto.Out(t[1])]]))
    assert_array(t, np.array([[0] * 4, [7] * 4], np.float32), "t")


def test_kernel_exception_in_a_chip_process(node):
    t = node.host_array(4)
    with pytest.raises(pto.KernelError) as e:
        node.run(lambda no: no.submit(1, node.kernels["raises"], pto.Out(t)))
    assert "chip 1" in e.value.details or "rank 1" in e.value.details, str(e.value)
    # (the chip process prints the traceback on its stderr: the one it inherited)
    node.run(lambda no: no.submit(0, node.kernels["add"], pto.In(t), pto.In(t), pto.Out(t)))


def test_node_commute_tasks_exclude_on_shared_bytes_only(node):
    """Node tasks with pto.Commute on the same host bytes, alternating
    between the two chips, never run at once and sum as in any order;
    two on disjoint halves of one array run at once (a rendezvous)."""
    acc = node.host_array(1, np.int64)
    inside = node.host_array(2, np.int64)
    acc[:] = 0
    inside[:] = 0
    node.run(lambda no: [no.submit(i % 2, node.kernels["commute_add"], pto.Commute(acc),
                                   pto.NoDep(inside), scalars=[i + 1]) for i in range(16)])
    assert int(acc[0]) == sum(range(1, 17)), acc
    assert int(inside[1]) == 1, f"{int(inside[1])} commute tasks inside at once"
    pair = node.host_array(8, np.int64)
    flags = node.host_array(3, np.int64)
    flags[:] = 0
    node.run(lambda no: [no.submit(h, node.kernels["commute_meet"], pto.Commute(pair[4 * h:4 * h + 4]),
                                   pto.NoDep(flags), scalars=[h]) for h in range(2)])
    assert list(flags) == [1, 1, 0], list(flags)


def test_node_bad_input(node):
    plain = np.zeros(4, np.float32)  # not in node host memory
    h = node.host_array(4)
    with pytest.raises(pto.InvalidArgumentError):
        node.run(lambda no: no.submit(0, node.kernels["add"], pto.In(plain), pto.In(h),
                                      pto.Out(h)))
    with pytest.raises(pto.InvalidArgumentError, match="pto.New is not supported"):
        node.run(lambda no: no.submit(0, node.kernels["add"], pto.In(h), pto.In(h),
                                      pto.New(4)))
    with pytest.raises(pto.InvalidArgumentError, match="not a kernel of this node"):
        with pto.Chip(clusters=1) as c:
            k = c.kernel("add")
            node.run(lambda no: no.submit(0, k, pto.In(h)))
    h8 = node.host_array(8)
    with pytest.raises(pto.InvalidArgumentError, match="at most 4 COMMUTE arguments"):
        node.run(lambda no: no.submit(0, node.kernels["add"],
                                      *[pto.Commute(h8[i:i + 1]) for i in range(5)]))
    with pytest.raises(pto.InvalidArgumentError, match="same number of tensors"):
        node.run(lambda no: no.submit_group([0, 1], node.kernels["add"], [[pto.In(h)], []]))
    with pytest.raises(pto.InvalidArgumentError):
        node.run(lambda no: no.domain([0, 5], {"x": 8}))
    # arguments of the wrong type are named (before: bare TypeError, AttributeError)
    for call, msg in [
            (lambda no: no.domain(0, {"x": 8}), "domain: chips: int 0 is not a sequence"),
            (lambda no: no.domain([0, 1], ["x"]), "domain: buffers: list ['x'] is not a mapping"),
            (lambda no: no.submit_group(0, node.kernels["add"], [[pto.In(h)]]),
             "chips: int 0 is not a sequence"),
            (lambda no: no.submit_group([0], node.kernels["add"], [pto.In(h)]),
             "argument list of chip 0: In"),
            (lambda no: no.allreduce(0, "s", h, h), "allreduce: dst: ndarray")]:
        with pytest.raises(pto.InvalidArgumentError) as e:
            node.run(call)
        assert msg in str(e.value), str(e.value)


def test_node_collective_counts_arrays_by_the_runs_domain(node):
    """A node-level collective takes one dst and one src array per rank of
    the domain as this run made it, whatever names the domain: its int id,
    or a Domain of another node whose id is the same. Before: with an int
    id the lists' own length was taken for the rank count, and C read the
    second rank's tensors past the end of the one-element arrays ('tensor
    4: dtype 653 is not a pto_dtype')."""
    a = node.host_array((2, SIZE))
    a[:] = 1
    sb = pto.coll_scratch_bytes(2, SIZE * 4)

    def orch(no, dom_of):
        dom = no.domain([0, 1], {"scratch": sb})
        no.allreduce(dom_of(dom), "scratch", [a[0]], [a[1]])

    other = pto.Domain(0, [0], {"scratch": sb})  # one chip: as another node's domain 0
    for dom_of in (int, lambda d: pto.Domain(int(d), other.chips, other.buffers)):
        with pytest.raises(pto.InvalidArgumentError,
                           match=r"allreduce: need 2 dst and src arrays \(one per rank of "
                                 r"domain \d+\), got 1 and 1"):
            node.run(lambda no: orch(no, dom_of))
    with pytest.raises(pto.InvalidArgumentError, match="allgather: no domain 12345 in this run"):
        node.run(lambda no: no.allgather(12345, "scratch", [a[0]], [a[1]]))
    assert_array(a, np.ones((2, SIZE), np.float32), "a (no collective ran)")


def test_node_collective_names_the_bad_array_by_rank(node):
    """A node-level collective's bad dst or src array is named as the
    call's, by rank. Before: the group task's refusal named its flattened
    argument ('submit_group: tensor 5: its bytes ... are neither node host
    memory ...'), which is no argument the caller passed."""
    a = node.host_array((2, SIZE))
    plain = np.zeros(SIZE, np.float32)  # not in node host memory
    sb = pto.coll_scratch_bytes(2, SIZE * 4)

    def orch(dst, src):
        def run(no):
            dom = no.domain([0, 1], {"scratch": sb})
            no.allreduce(dom, "scratch", dst, src)
        return run

    for dst, src, msg in [([a[0], plain], [a[0], a[1]], r"node allreduce: dst\[1\] \(rank 1, "
                           r"chip 1\): its bytes .* are neither node host memory"),
                          ([a[0], a[1]], [plain, a[1]], r"node allreduce: src\[0\] \(rank 0, "
                           r"chip 0\): its bytes .* are neither node host memory")]:
        with pytest.raises(pto.InvalidArgumentError, match=msg):
            node.run(orch(dst, src))


def test_node_collective_names_a_none_entry(node):
    """A node-level collective's per-rank list with None where C reads an
    array (any dst, a src other than a broadcast's non-root) is refused
    naming the entry. Before: 'dst[1] (rank 1, chip 1): buf is NULL', a C
    pointer the caller never passed. A broadcast's src of a rank other than
    its root is not read: None there is taken."""
    a = node.host_array((2, SIZE))
    sb = pto.coll_scratch_bytes(2, SIZE * 4)

    def orch(call, dst, src, *extra):
        def run(no):
            dom = no.domain([0, 1], {"scratch": sb})
            getattr(no, call)(dom, "scratch", dst, src, *extra)
        return run

    for call, dst, src, extra, msg in [
            ("allreduce", [a[0], None], [a[0], a[1]], (), "allreduce: dst[1] is None"),
            ("allreduce", [a[0], a[1]], [None, a[1]], (), "allreduce: src[0] is None"),
            ("alltoall", [None, a[1]], [a[0], a[1]], (), "alltoall: dst[0] is None"),
            ("broadcast", [a[0], a[1]], [a[0], None], (1,), "broadcast: src[1] is None")]:
        with pytest.raises(pto.InvalidArgumentError) as e:
            node.run(orch(call, dst, src, *extra))
        assert msg in str(e.value), str(e.value)
        assert "NULL" not in str(e.value), str(e.value)
    a[0] = 7
    node.run(orch("broadcast", [a[0], a[1]], [a[0], None], 0))
    assert_array(a[1], np.full(SIZE, 7, np.float32), "broadcast from rank 0, src[1] None")
    a = None


def test_node_allgather_in_place_orders_every_reader_of_dst():
    """A node-level collective whose src lies at the start of a larger dst
    (rank 0's own block of an allgather in place) still writes all of dst:
    a later task reading dst runs after it. Before: a src at dst's first
    element was taken for the whole in-place dst, and dst's other bytes
    had no dependency: chip 2's copy of rank 1's block of rank 0's dst ran
    while the allgather waited for its chip 1, and read zeros."""
    sb = pto.coll_scratch_bytes(2, SIZE * 4)
    with pto.Node(3, {"hold": hold_chip, "copy": copy_kernel},
                  **node_opts(DEVICE_IDS["coll3"])) as node:
        dst = node.host_array((2, 2 * SIZE))
        dst[:] = 0
        dst[0, :SIZE] = 1
        dst[1, SIZE:] = 2
        out = node.host_array(SIZE)
        idle = node.host_array(1)

        def orch(no):
            dom = no.domain([0, 1], {"scratch": sb})
            no.submit(1, node.kernels["hold"], pto.NoDep(idle))  # the allgather waits for chip 1
            no.allgather(dom, "scratch", [dst[0], dst[1]], [dst[0, :SIZE], dst[1, SIZE:]])
            # rank 1's block of rank 0's dst: written by the allgather only
            no.submit(2, node.kernels["copy"], pto.In(dst[0, SIZE:]), pto.Out(out))

        node.run(orch)
        want = np.concatenate([np.ones(SIZE), np.full(SIZE, 2)]).astype(np.float32)
        assert_array(out, want[SIZE:], "chip 2's copy of rank 1's block of rank 0's dst")
        assert_array(dst, np.stack([want, want]), "dst")
        dst = out = idle = None


def test_node_read_refuses_a_window_view_of_another_run(node):
    """A window view is valid in its run (its domain ends with it). Before:
    NodeOrch.read took one from an earlier run, and where a later domain's
    window lay at the same place it returned that window's data silently
    (submit refuses such a view: 'belongs to another run')."""
    t = node.host_array(4)
    keep = {}

    def first(no):
        keep["w"] = no.window(no.domain([0, 1], {"x": 16}), 0, "x", np.float32, 4)

    def second(no):
        w = no.window(no.domain([0, 1], {"y": 16}), 0, "y", np.float32, 4)
        no.submit(0, node.kernels["add"], pto.In(t), pto.In(t), pto.Out(w))
        no.read(keep["w"])

    node.run(first)
    with pytest.raises(pto.InvalidArgumentError, match="belongs to another run"):
        node.run(second)


def test_node_orchestration_raising_another_calls_error_raises_it(node):
    """A node orchestration that raises the pto.Error of a call that is not
    its own run's (a chip's kernel registration) gets that exception from
    Node.run. Before: it was taken for an error of the run's own calls,
    which fail the run; the run had not failed, so Node.run returned as a
    success and the exception was lost."""
    def orch(no):
        with pto.Chip(clusters=1) as other:
            other.kernel(lambda ctx: None, name="twice")
            other.kernel(lambda ctx: 1, name="twice")

    with pytest.raises(pto.InvalidArgumentError, match="twice"):
        node.run(orch)


def test_bad_comm_arguments_fail_the_task_with_details(node):
    t = node.host_array((2, 4))

    def orch(no):
        dom = no.domain([0, 1], {"x": 16})
        no.submit_group([0, 1], node.kernels["bad_remote"], [[pto.In(t[0])], [pto.In(t[1])]],
                        scalars=[dom])

    with pytest.raises(pto.Error) as e:
        node.run(orch)
    assert e.value.code in (-1, -35) and e.value.details, str(e.value)


def test_close_refused_while_host_arrays_live():
    n = pto.Node(1, {"add": "add"}, **node_opts(DEVICE_IDS["misc"][:1]))
    a = n.host_array(8)
    with pytest.raises(pto.InvalidArgumentError, match="still referenced"):
        n.close()
    a[:] = 1  # still valid memory
    del a
    n.close()
    with pytest.raises(pto.InvalidArgumentError, match="after close"):
        n.host_array(8)


def test_node_trace(tmp_path):
    path = tmp_path / "node.json"
    with pto.Node(1, {"add": "add"}, trace=str(path), **node_opts(DEVICE_IDS["misc"][1:])) as n:
        a = n.host_array(8)
        n.run(lambda no: no.submit(0, n.kernels["add"], pto.In(a), pto.In(a), pto.Out(a)))
        a = None
    assert b"traceEvents" in path.read_bytes()


@pytest.mark.parametrize("var", ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"])
def test_node_refuses_mpirun_at_once(monkeypatch, var):
    """Under mpirun (as libpto detects it) pto.Node says, before anything
    starts, that it does not run there, in Python's terms."""
    monkeypatch.setenv(var, "2")
    with pytest.raises(pto.MPIError, match=f"pto.Node does not run under mpirun \\({var} is set\\)"):
        pto.Node(2, {}, device_ids=DEVICE_IDS["misc"])


def test_host_array_checks_every_dim_before_allocating():
    """Each dim of host_array's shape must be >= 1, checked before anything
    is allocated. Before, (-1024, -1024) passed (the product is positive),
    the memory was allocated, np.asarray raised a bare ValueError and the
    allocation was never given back: every later host_array failed; (-2, 2)
    said the shape "is empty"; a bad dtype name raised a bare TypeError."""
    with pto.Node(1, {"add": "add"}, device_ids=DEVICE_IDS["host_array"], clusters=1,
                  schedulers=1, task_slots=64, heap_bytes=1 << 20, host_bytes=4 << 20,
                  window_space=16 << 20, lease_wait_ms=60000, quiet=True) as node:
        for shape, dim in (((-1024, -1024), "shape[0] -1024"), ((-2, 2), "shape[0] -2"),
                           ((2, 0), "shape[1] 0"), (-4, "shape -4")):
            with pytest.raises(pto.InvalidArgumentError) as e:
                node.host_array(shape)
            assert f"host_array: {dim}, must be 1.." in str(e.value), str(e.value)
        with pytest.raises(pto.InvalidArgumentError, match="host_array: dtype: 'bogus' is not a "
                                                           "dtype"):
            node.host_array(4, "bogus")
        with pytest.raises(pto.InvalidArgumentError, match="host_array: shape: NoneType"):
            node.host_array(None)
        a = node.host_array((1024, 1000))  # nearly all of host_bytes: nothing was taken
        assert a.shape == (1024, 1000) and (a == 0).all()
        del a  # Node.close refuses while a host array is referenced


_NODE_CLOSE_RACE = r"""
import sys, pto
from close_first import race
node = pto.Node(1, {"add": "add"}, device_ids=[int(sys.argv[1])], clusters=1, schedulers=1,
                quiet=True, lease_wait_ms=60000)
race(node, lambda no: None)
"""


def test_node_close_from_another_thread_never_frees_a_node_a_run_uses():
    """As for Chip: before, Node.run looked the node up before its lock and
    close() did not take it, so a close between the two destroyed the node
    under the run (use after free). Now close takes the lock and run checks
    the node under it."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _NODE_CLOSE_RACE, str(DEVICE_IDS["misc"][1])],
                       capture_output=True, text=True, timeout=120, env=close_first_env())
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.splitlines() == ["closed", "run refused: pto.Node used after close()"], \
        r.stdout


def test_node_orchestration_that_returns_without_running_its_body(node):
    """Node.run of an async def orchestration (or one with yield): before,
    nothing was submitted and the run passed as a success."""
    t = node.host_array(4)

    async def coro(no):
        no.submit(0, node.kernels["add"], pto.In(t), pto.In(t), pto.Out(t))

    with pytest.raises(pto.InvalidArgumentError, match="'.*coro' returned a coroutine"):
        node.run(coro)
    # not a function at all: refused before the run, as Chip.run refuses it
    # (before: a bare TypeError, raised once an empty run had ended)
    with pytest.raises(pto.InvalidArgumentError, match="Node.run: orchestrate 5 is not callable"):
        node.run(5)
    node.run(lambda no: no.submit(0, node.kernels["add"], pto.In(t), pto.In(t), pto.Out(t)))


def test_window_buffer_names_with_a_nul_byte_are_refused(node):
    """C reads a window buffer's name up to its first NUL byte. Before:
    window(dom, 0, "x\\0y", ...) returned a view of buffer "x", a node
    collective's scratch "s\\0junk" used buffer "s", and a domain's buffer
    "a\\0b" was created as "a", all as a success."""
    h = node.host_array(8)
    scratch = pto.coll_scratch_bytes(2, 8 * 4)
    calls = [
        (lambda no: no.window(no.domain([0, 1], {"x": 32}), 0, "x\0y", np.float32, 8),
         "window: name 'x\\\\x00y' contains a NUL byte \\(C would see 'x'\\)"),
        (lambda no: no.domain([0, 1], {"a\0b": 32}),
         "domain: window buffer: name 'a\\\\x00b' contains a NUL byte"),
        (lambda no: no.allreduce(no.domain([0, 1], {"s": scratch}), "s\0junk", [h, h], [h, h]),
         "allreduce: scratch: name 's\\\\x00junk' contains a NUL byte")]
    for call, msg in calls:
        with pytest.raises(pto.InvalidArgumentError, match=msg):
            node.run(call)
    src, dst = node.host_array((2, 8)), node.host_array((2, 8))
    src[:] = 1
    node.run(lambda no: no.allreduce(no.domain([0, 1], {"s": scratch}), "s", [dst[0], dst[1]],
                                     [src[0], src[1]]))
    assert_array(dst, np.full((2, 8), 2, np.float32), "allreduce of two ones")


def _store_seven(ctx, a):
    a[:] = 7


def test_node_created_while_another_python_thread_runs():
    """pto forks the chip processes from C with the GIL released, and
    another Python thread usually held it at the fork. Before: each child
    inherited the GIL held by a thread it does not have, its first Python
    call (registering the kernels) waited for ever, and pto.Node raised
    StartupTimeoutError after startup_timeout_ms (5 minutes by default).
    The fork is now taken as os.fork takes one (the GIL held across it)."""
    import threading
    stop = threading.Event()

    def busy():  # pure Python: holds the GIL but for the switch interval
        while not stop.is_set():
            sum(range(1000))

    th = threading.Thread(target=busy)
    th.start()
    try:
        for i in range(2):
            with pto.Node(2, {"seven": _store_seven}, device_ids=DEVICE_IDS["misc"], clusters=1,
                          schedulers=1, quiet=True, startup_timeout_ms=10000,
                          lease_wait_ms=60000) as n:
                h = n.host_array((2, 4))
                n.run(lambda no: [no.submit(c, n.kernels["seven"], pto.Out(h[c])) for c in (0, 1)])
                assert_array(h, np.full((2, 4), 7, np.float32), f"node {i}: h")
                h = None
    finally:
        stop.set()
        th.join()


def test_node_kernel_specs_under_other_names():
    """Node(kernels={name: spec}) registers each spec as its key. Before, it
    renamed the caller's KernelSpec in place: one spec under two keys had
    both named after the last, which the chips refused at start
    (ChipDiedError, the cause only on their stderr), and pto.ref_kernel("add")
    under the key "plus" looked for a reference kernel 'plus' (the same), the
    spec left renamed for later use (chip.kernel(spec): AttributeError)."""
    seven, add = pto.py_kernel(_store_seven), pto.ref_kernel("add")
    with pto.Node(1, {"a": seven, "b": seven, "plus": add}, device_ids=DEVICE_IDS["misc"][:1],
                  clusters=1, schedulers=1, quiet=True, startup_timeout_ms=20000,
                  lease_wait_ms=60000) as n:
        assert sorted(n.kernels) == ["a", "b", "plus"]
        h = n.host_array((3, 4))

        def orch(no):
            no.submit(0, n.kernels["a"], pto.Out(h[0]))
            no.submit(0, n.kernels["b"], pto.Out(h[1]))
            no.submit(0, n.kernels["plus"], pto.In(h[0]), pto.In(h[1]), pto.Out(h[2]))

        n.run(orch)
        assert_array(h, np.array([[7] * 4, [7] * 4, [14] * 4], np.float32), "h")
        h = None
    assert (seven.name, add.name) == ("_store_seven", "add")  # the caller's specs unchanged
    with pto.Chip(clusters=1) as c:
        assert c.kernel(add).name == "add"
        assert c.kernel(add, name="plus").name == "plus"  # before: the name was ignored
    with pytest.raises(pto.InvalidArgumentError, match="kernels 1 and '1' are both named '1'"):
        pto.Node(1, {1: seven, "1": add}, device_ids=DEVICE_IDS["misc"][:1])


def test_node_left_on_an_exception_is_closed_and_its_arrays_stay_valid():
    """A with block of a Node left on an exception: its traceback holds the
    block's host arrays, so Node.close was refused there and the node left
    alive, chip processes and device leases, until the traceback went (in
    an interactive session, for ever: the same code again raised
    DeviceBusyError). Now the node is closed, and its host memory stays
    for the arrays still referenced (this process's own memory now), freed
    with the last of them."""
    ids = DEVICE_IDS["misc"][:1]
    opts = dict(device_ids=ids, clusters=1, schedulers=1, quiet=True, startup_timeout_ms=20000)
    with pytest.raises(pto.KernelError):
        with pto.Node(1, {"seven": _store_seven, "raises": raises_in_child}, **opts) as n:
            h = n.host_array(4)
            v = h[1:3]  # a view: keeps the memory too
            n.run(lambda no: no.submit(0, n.kernels["seven"], pto.Out(h)))
            n.run(lambda no: no.submit(0, n.kernels["raises"], pto.Out(h)))
    with pytest.raises(pto.InvalidArgumentError, match="used after close"):
        n.host_array(4)
    assert_array(h, np.full(4, 7, np.float32), "h after its node closed")
    v[:] = 3  # still writable memory
    assert_array(h, np.array([7, 3, 3, 7], np.float32), "h")
    # the devices are free: the same node again (before: DeviceBusyError)
    with pto.Node(1, {"seven": _store_seven}, **opts) as n2:
        h2 = n2.host_array(4)
        n2.run(lambda no: no.submit(0, n2.kernels["seven"], pto.Out(h2)))
        assert_array(h2, np.full(4, 7, np.float32), "h2")
        h2 = None
    h = v = None  # the kept memory is unmapped now


class _InterruptAfter:
    """The module's lib, but the named call raises KeyboardInterrupt once it
    has returned: where Python raises a Ctrl-C that came during the call."""

    def __init__(self, lib, name):
        self._lib, self._name = lib, name

    def __getattr__(self, attr):
        f = getattr(self._lib, attr)
        if attr != self._name:
            return f

        def call(*a):
            f(*a)
            raise KeyboardInterrupt

        return call


def test_ctrl_c_as_a_node_is_created_leaves_nothing(monkeypatch):
    """Ctrl-C during pto.Node(...): Python raises the KeyboardInterrupt as
    the C call returns, before the binding took the node it made. Before:
    that node stayed for the life of the process, its chip processes
    running and its device leases held (a Node of those devices:
    DeviceBusyError)."""
    import pto._node
    ids = DEVICE_IDS["misc"][:1]
    opts = dict(device_ids=ids, clusters=1, schedulers=1, quiet=True, startup_timeout_ms=20000)
    with monkeypatch.context() as m:
        m.setattr(pto._node, "lib", _InterruptAfter(pto._node.lib, "pyk_node_create"))
        with pytest.raises(KeyboardInterrupt):
            pto.Node(1, {"seven": _store_seven}, **opts)
    with pto.Node(1, {"seven": _store_seven}, **opts) as n:  # the device is free
        h = n.host_array(4)
        n.run(lambda no: no.submit(0, n.kernels["seven"], pto.Out(h)))
        assert_array(h, np.full(4, 7, np.float32), "h")
        h = None


def _rank_of_scalar(ctx, a):
    a[:] = ctx.rank(ctx.scalars[0])


def _size_of_scalar(ctx, a):
    a[:] = ctx.size(ctx.scalars[0])


def test_rank_and_size_of_a_domain_the_chip_has_not_say_why():
    """ctx.rank(dom) / ctx.size(dom) in a chip's Python kernel, of a domain
    of an earlier run, or one the chip is not in. Before: the details said
    "rank(domain 1)" and no more (pto_comm_rank gives only a code)."""
    import re
    with pto.Node(2, {"rank": _rank_of_scalar, "size": _size_of_scalar},
                  device_ids=DEVICE_IDS["misc"], clusters=1, schedulers=1, quiet=True,
                  startup_timeout_ms=20000, lease_wait_ms=60000) as n:
        h = n.host_array(4)
        earlier = {}
        n.run(lambda no: earlier.setdefault("d", no.domain([0, 1], {"x": 8})))
        cases = [
            (lambda no: no.submit(0, n.kernels["rank"], pto.Out(h), scalars=[earlier["d"]]),
             re.escape(f"rank(domain {earlier['d']}): chip 0 has no domain {earlier['d']}: ")),
            (lambda no: no.submit(0, n.kernels["size"], pto.Out(h),
                                  scalars=[no.domain([1], {"x": 8})]),
             r"size\(domain [0-9]+\): chip 0 has no domain [0-9]+: the chip is not among"),
        ]
        for orch, why in cases:
            with pytest.raises(pto.InvalidArgumentError, match=why):
                n.run(orch)
        n.run(lambda no: no.submit(1, n.kernels["size"], pto.Out(h),
                                   scalars=[no.domain([0, 1], {"x": 8})]))
        assert_array(h, np.full(4, 2, np.float32), "size of a domain of two")
        h = None
