"""Controlled schedules from Python (docs/schedules.md): pto.Chip's
schedule_seed, record and replay options.

A deliberate race (two kernels share an array neither declares) fails
under some seed; that seed's record replays the same wrong values; the
correct program (the array declared) passes under every seed; a bad record
raises ReplayError."""
import numpy as np
import pytest

import pto
from conftest import assert_array

N = 16


def race_program(declared: bool):
    """(orchestrate, arrays): "bump" adds 1 to x, "use" computes 2 x + y,
    x declared (InOut, In) or not (the race)."""
    x = np.arange(N, dtype=np.float32)
    y = np.full(N, 100, np.float32)
    out = np.zeros(N, np.float32)
    count = np.zeros(2, np.int32)

    def bump(ctx, *ts):
        xs = ts[0] if declared else x
        lo = ctx.block_idx * (N // 2)
        xs[lo:lo + N // 2] += 1
        ts[-1][ctx.block_idx] = 1

    def use(ctx, *ts):
        xs, ys, o = ts if declared else (x, ts[0], ts[1])
        lo, hi = ctx.block_idx * (N // 2), (ctx.block_idx + 1) * (N // 2)
        o[lo:hi] = 2 * xs[lo:hi] + ys[lo:hi]

    def orchestrate(o, kb, ku):
        if declared:
            o.submit(kb, pto.InOut(x), pto.Out(count), block_num=2)
            o.submit(ku, pto.In(x), pto.In(y), pto.Out(out), block_num=2)
        else:
            o.submit(kb, pto.Out(count), block_num=2)
            o.submit(ku, pto.In(y), pto.Out(out), block_num=2)

    return orchestrate, bump, use, out, (np.arange(N) + 1) * 2 + 100


def run_race(declared: bool, **opts):
    orchestrate, bump, use, out, want = race_program(declared)
    with pto.Chip(2, **opts) as chip:
        kb, ku = chip.kernel(bump, "bump"), chip.kernel(use, "use")
        chip.run(orchestrate, kb, ku)
    return out, want.astype(np.float32)


def test_race_found_and_replayed(tmp_path):
    rec = str(tmp_path / "race.rec")
    failing = None
    for seed in range(1, 41):
        out, want = run_race(False, schedule_seed=seed, record=rec)
        if not np.array_equal(out, want):
            failing = seed
            break
    assert failing is not None, "no seed of 1..40 showed the race"
    wrong = out.copy()
    for _ in range(5):
        again, _ = run_race(False, replay=rec)
        assert_array(again, wrong, f"replay of seed {failing}")
    # the same seed, without a record, makes the same choices
    again, _ = run_race(False, schedule_seed=failing)
    assert_array(again, wrong, f"seed {failing} again")


def test_correct_program_passes_every_seed():
    for seed in range(1, 21):
        out, want = run_race(True, schedule_seed=seed)
        assert_array(out, want, f"seed {seed}")


def test_bad_records(tmp_path):
    rec = tmp_path / "r.rec"
    run_race(False, schedule_seed=3, record=str(rec))
    text = rec.read_text()
    assert text.startswith("pto-schedule 1\nseed 3\n")
    (tmp_path / "cut.rec").write_text(text[:-6])
    with pytest.raises(pto.ReplayError, match="truncated") as e:
        run_race(False, replay=str(tmp_path / "cut.rec"))
    assert e.value.code == -21
    with pytest.raises(pto.ReplayError, match="cannot open"):
        run_race(False, replay=str(tmp_path / "none.rec"))
    # the program departs from the record: the declared variant submits
    # the same kernels, but "use" becomes ready only after "bump"
    with pytest.raises(pto.ReplayError, match="diverged at line"):
        for seed in range(1, 41):
            run_race(False, schedule_seed=seed, record=str(rec))
            run_race(True, replay=str(rec))


def test_bad_options():
    with pytest.raises(pto.InvalidArgumentError, match="schedule_seed"):
        pto.Chip(1, schedule_seed=-1)
    with pytest.raises(pto.InvalidArgumentError, match="not a file name"):
        pto.Chip(1, record="")


# ---- several chips (pto.Node) ----
def node_update(ctx, x):
    """x = x * m + a, on a chip (the node's order of tasks shows in x)."""
    x[0] = x[0] * ctx.scalars[0] + ctx.scalars[1]


def host_update(ctx, x):
    x[0] = x[0] * ctx.scalars[0] + ctx.scalars[1]


def run_node_updates(**opts) -> float:
    """Three node tasks, a host task and one on each chip, update one host
    value without declaring it: the value is the order they ran in."""
    from conftest import DEVICE_IDS
    with pto.Node(2, {"update": node_update}, host_fns={"update": host_update}, nworkers=1,
                  device_ids=DEVICE_IDS["misc"], clusters=1, lease_wait_ms=60000, quiet=True,
                  **opts) as node:
        x = node.host_array(1)
        x[0] = 1

        def orch(no):
            no.submit_host("update", pto.NoDep(x), scalars=[2, 1])
            no.submit(0, node.kernels["update"], pto.NoDep(x), scalars=[3, 0])
            no.submit(1, node.kernels["update"], pto.NoDep(x), scalars=[1, 5])

        node.run(orch)
        value = float(x[0])
        del x  # the node closes with no host array left
    return value


def test_node_order_seeded_recorded_replayed(tmp_path):
    values = {seed: run_node_updates(schedule_seed=seed) for seed in range(1, 7)}
    assert len(set(values.values())) >= 2, f"every seed ran the tasks in one order: {values}"
    assert run_node_updates(schedule_seed=4) == values[4]
    rec = str(tmp_path / "n.rec")
    assert run_node_updates(schedule_seed=4, record=rec) == values[4]
    assert (tmp_path / "n.rec").read_text().startswith("pto-node-schedule 1\nseed 4\n")
    assert run_node_updates(replay=rec) == values[4]
    text = (tmp_path / "n.rec").read_text()
    (tmp_path / "cut.rec").write_text(text[:-4])
    with pytest.raises(pto.ReplayError, match="truncated"):
        run_node_updates(replay=str(tmp_path / "cut.rec"))
    with pytest.raises(pto.InvalidArgumentError, match="pto.Node: record = '' is not a file name"):
        run_node_updates(record="")
