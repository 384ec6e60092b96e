"""`tracer campaign PLAN`: a plan file's matrix of runs, here one at a time, over a Ray cluster, or as
one Slurm job per cell."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tracer.cli.common import add_out_dir, console, err_console
from tracer.cli.outputs import output_dir, resolved_path
from tracer.core.cases import dataset_label
from tracer.core.errors import UserError

if TYPE_CHECKING:  # the campaign package (pydantic plans, Ray) loads when a campaign runs, not at every start-up
    from rich.console import Console

    from tracer.campaign.estimate import Disk
    from tracer.campaign.plan import Cell, Plan
    from tracer.campaign.record import Campaign
    from tracer.campaign.slurm import SlurmOptions
    from tracer.core.runfolder import RunFolder

EXIT_SOME_FAILED = 1
TABLE_CSV = "epoch_times.csv"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "campaign",
        help="run a plan file's matrix of runs, resumably, here, over a Ray cluster or on Slurm",
        description="Run every cell of a TOML plan (see the README, Campaigns) one at a time, one per node on a "
        "Ray cluster, or as one Slurm job per cell. Killed and started again, it skips finished runs, follows "
        "Slurm jobs still queued or running, and redoes the interrupted run.",
    )
    p.add_argument("plan", type=Path, help="the plan file (TOML)")
    p.add_argument("--dry-run", action="store_true", help="list the runs and their estimated time; run nothing")
    p.add_argument("--retry", type=int, default=0, metavar="N", help="run a failed cell up to N more times")
    p.add_argument("--ray", metavar="ADDRESS", help="spread the runs over the Ray cluster at ADDRESS (or 'auto')")
    add_out_dir(p)
    p.add_argument(
        "--shared-dir", type=Path, help="with --ray: a folder every node sees; run folders travel through it, not Ray"
    )
    p.add_argument("--nodes", type=int, help="with --dry-run: the number of nodes to spread the estimate over")
    p.add_argument("--resume", action="store_true", help="only go on with a campaign begun before (an error if none)")
    slurm = p.add_argument_group("Slurm (one job per cell, each on a node of its own)")
    slurm.add_argument("--slurm", action="store_true", help="submit every cell as a Slurm job (sbatch) and follow them")
    slurm.add_argument("--partition", help="the partition to submit to (default: the cluster's)")
    slurm.add_argument("--account", help="the account the jobs are charged to")
    slurm.add_argument(
        "--time", metavar="HH:MM:SS", help="time limit of every job (default: 3x an earlier run of the cell + 10 min)"
    )
    slurm.add_argument("--gpus-per-job", type=int, metavar="N", help="GPUs a GPU cell asks for (default: the plan's)")
    slurm.add_argument("--max-jobs", type=int, metavar="K", help="at most K of the campaign's jobs in Slurm at a time")
    slurm.add_argument(
        "--detach", action="store_true", help="submit and return, leaving the jobs queued; run again to collect them"
    )
    p.add_argument("--no-report", action="store_true", help="write only the epoch-time table at the end")
    p.set_defaults(func=cmd_campaign)


def cmd_campaign(args: argparse.Namespace) -> int:
    from tracer.campaign.local import kill_leftover, run_local
    from tracer.campaign.plan import load_plan
    from tracer.campaign.record import FAILED, OK, RUNNING, Campaign
    from tracer.campaign.view import CampaignView

    if args.retry < 0:
        raise UserError("--retry must be 0 or more")
    if args.shared_dir is not None and args.ray is None:
        raise UserError("--shared-dir goes with --ray: the local runner writes straight into --out")
    slurm_opts = _slurm_options(args)
    plan = load_plan(args.plan)
    resolved_path(args.out, "--out")  # a symlink loop: one line, in a dry run too (which writes nothing)
    if args.dry_run:
        return dry_run(plan, args.out, args.nodes, console(), slurm_opts)
    if args.resume and not Campaign(plan, args.out.resolve()).path.exists():
        raise UserError(f"--resume: campaign '{plan.name}' has no record in {args.out} yet: nothing to resume")
    out_dir = output_dir(args.out).resolve()
    err = err_console()
    with Campaign(plan, out_dir) as campaign:
        jobs = sorted(str(e.job_id) for e in campaign.cells.values() if e.state == RUNNING and e.job_id)
        if jobs and slurm_opts is None:
            raise UserError(
                f"cells of campaign '{plan.name}' have Slurm jobs (ids {' '.join(jobs)}): go on with --slurm, "
                "or scancel them first"
            )
        slurm = None
        if slurm_opts is not None:
            from tracer.campaign.slurm import Slurm
            from tracer.campaign.slurm_runner import adopt, has_job

            slurm = Slurm()
            for note in adopt(campaign, slurm):
                err.print(f"resuming: {note}")
        keep = has_job if slurm is not None else None
        for note in campaign.recover(kill=None if args.ray or slurm else kill_leftover, keep=keep):
            err.print(f"resuming: {note}")
        cells = campaign.todo(retry_failed=args.retry > 0)
        following = [e for e in campaign.entries() if e.state == RUNNING]
        cells = [c for c in cells if c.cell_id not in {e.cell_id for e in following}]
        done = len(plan.cells) - len(cells) - len(following)
        also = f", {len(following)} in Slurm already" if following else ""
        err.print(
            f"campaign {plan.name}: {len(plan.cells)} runs, {done} done already{also}, {len(cells)} to run -> {out_dir}"
        )
        view = CampaignView(err, plan.name, len(plan.cells), done)
        left: list[str] = []
        try:
            if args.ray:
                from tracer.campaign.ray_runner import run_ray

                shared = args.shared_dir.resolve() if args.shared_dir else None
                run_ray(campaign, longest_first(cells, out_dir), args.retry, view, args.ray, shared)
            elif slurm is not None and slurm_opts is not None:
                from tracer.campaign.estimate import estimate
                from tracer.campaign.slurm_runner import run_slurm

                left = run_slurm(
                    campaign, longest_first(cells, out_dir), args.retry, view, slurm_opts, slurm,
                    estimate(list(plan.cells), out_dir), detach=args.detach, confirm=_confirm,
                )  # fmt: skip
            else:
                run_local(campaign, cells, args.retry, view)
        except KeyboardInterrupt as e:  # Ctrl-C, SIGTERM, SIGHUP, SIGQUIT: the summary, then the signal's exit code
            view.close()
            counts = campaign.counts()
            err.print(
                f"campaign {plan.name} interrupted: {counts[OK]} ok, {counts[FAILED]} failed, {counts['todo']} not run;"
                f" the same command resumes it; record {campaign.path}"
            )
            return int(getattr(e, "exit_code", 130))
        finally:
            view.close()
        counts = campaign.counts()
        folders = campaign.run_folders()
        if left:
            err.print(
                f"campaign {plan.name}: {counts[OK]} ok, {counts[FAILED]} failed; detached from Slurm job(s) "
                f"{' '.join(left)}: run the same command again to follow them and file their runs"
            )
            return 0
        write_outputs(campaign, folders, not args.no_report, err)
        err.print(
            f"campaign {plan.name}: {counts[OK]} ok, {counts[FAILED]} failed, {counts['todo']} not run; "
            f"record {campaign.path}"
        )
        return EXIT_SOME_FAILED if counts[FAILED] or counts["todo"] else 0


SLURM_ONLY = ("partition", "account", "time", "gpus_per_job", "max_jobs", "detach")


def _slurm_options(args: argparse.Namespace) -> SlurmOptions | None:
    from tracer.campaign.slurm import SlurmOptions

    given = [name for name in SLURM_ONLY if getattr(args, name) not in (None, False)]
    if not args.slurm:
        if given:
            raise UserError(f"--{given[0].replace('_', '-')} goes with --slurm")
        return None
    if args.ray:
        raise UserError("--slurm and --ray are two ways to run a campaign: choose one")
    return SlurmOptions(args.partition, args.account, args.time, args.gpus_per_job, args.max_jobs).check()


def _confirm(question: str) -> bool:
    """Asks on the terminal (stdin); no answer (end of input, another Ctrl-C) is no."""
    import sys

    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except (KeyboardInterrupt, OSError):
        return False
    return answer.strip().lower() in ("y", "yes")


def longest_first(cells: list[Cell], out_dir: Path) -> list[Cell]:
    """Ray starts queued runs roughly in the order given: the longest first shortens the campaign
    (a long run started last would leave the other nodes idle). Cells without an estimate go first."""
    from tracer.campaign.estimate import estimate

    seconds = estimate(cells, out_dir)
    return sorted(cells, key=lambda c: (seconds[c.cell_id] is not None, -(seconds[c.cell_id] or 0.0)))


def dry_run(plan: Plan, out_dir: Path, nodes: int | None, out: Console, slurm: SlurmOptions | None = None) -> int:
    from rich.table import Table

    from tracer.campaign.estimate import clock, disk, estimate, size
    from tracer.campaign.record import FAILED, OK, Campaign

    campaign = Campaign(plan, out_dir.resolve()).peek()
    seconds = estimate(list(plan.cells), out_dir)
    disks = disk(list(plan.cells), out_dir, seconds)
    table = Table("cell", "framework", "model", "dataset", "device", "batch", "epochs", "state", "estimate", "disk")
    todo_s, unknown, todo = 0.0, 0, 0
    todo_disks = []
    for cell in plan.cells:
        entry = campaign.cells.get(cell.cell_id)
        state = entry.state if entry and entry.state in (OK, FAILED) else "to run"
        est, space = seconds[cell.cell_id], disks[cell.cell_id]
        if state == "to run":
            todo += 1
            todo_disks.append(space)
            if est is None:
                unknown += 1
            else:
                todo_s += est
        shown = "?" if space is None or space.total_mib is None else size(space.total_mib)
        what = (cell.model, dataset_label(cell.dataset), cell.device, str(cell.batch), str(cell.epochs))
        if cell.command:  # the script's own model, data and batch: the command stands for them
            what = (cell.label(), "-", "-", "-", "-")
        table.add_row(
            cell.cell_id, cell.framework, *what, state, "?" if est is None else clock(est), shown,
        )  # fmt: skip
    out.print(table)
    known = todo - unknown
    line = f"{len(plan.cells)} runs in plan {plan.name}, {todo} to run; estimated {clock(todo_s)} for {known} of them"
    if unknown:
        line += f"; {unknown} have no earlier run of the same setting in {out_dir} to estimate from"
    out.print(line)
    out.print(disk_line(todo_disks))
    if nodes and nodes > 1 and known:
        out.print(f"over {nodes} nodes (one run per node at a time): about {clock(todo_s / nodes)} at best")
    if slurm is not None:
        print_sbatch_settings(campaign, seconds, slurm, out)
    return 0


def disk_line(disks: list[Disk | None]) -> str:
    """The disk the cells still to run need, and for traced cells with and without their trace windows."""
    from tracer.campaign.estimate import size

    known = [(d, d.total_mib, d.total_whole_mib or 0.0) for d in disks if d is not None and d.total_mib is not None]
    if not known:
        return "disk: no estimate (no earlier run of these settings, or of their trace backend)"
    line = f"disk: {size(sum(mib for _, mib, _ in known))} for {len(known)} of {len(disks)} runs"
    traced = [(d, mib, whole) for d, mib, whole in known if d.traced_epochs]
    if traced:
        windowed = sum(mib for _, mib, _ in traced)
        whole = sum(w for _, _, w in traced)
        epochs = sorted({d.traced_epochs for d, _, _ in traced})
        line += (
            f"; their {len(traced)} traced runs {size(windowed)} as planned (traced in a window of "
            f"{'/'.join(map(str, epochs))} epoch(s), --trace-window), {size(whole)} if traced whole"
        )
    return line


def print_sbatch_settings(
    campaign: Campaign, seconds: dict[str, float | None], opts: SlurmOptions, out: Console
) -> None:
    """Each cell still to run with the `sbatch` options its job would be submitted with."""
    from tracer.campaign.record import FAILED, OK
    from tracer.campaign.slurm import job_name, sbatch_settings, time_limit

    out.print("sbatch settings per cell (each job runs `tracer profile` for its cell):")
    for cell in campaign.plan.cells:
        entry = campaign.cells.get(cell.cell_id)
        if entry is not None and entry.state in (OK, FAILED):
            continue
        attempt = (entry.attempts if entry else 0) + 1
        name = job_name(campaign.plan.name, cell.cell_id, attempt)
        log = campaign.log_path(cell.cell_id, attempt)
        settings = sbatch_settings(cell, opts, name, log, time_limit(cell, opts, seconds[cell.cell_id]))
        out.print(f"{cell.cell_id}: {' '.join(settings)}", soft_wrap=True, markup=False, highlight=False)


def write_outputs(campaign: Campaign, folders: list[RunFolder], report: bool, err: Console) -> None:
    """The study's epoch-time table (Table 1/2) as CSV, always; the full report where `analyzers.report`
    is there. Neither may lose the campaign: a failure is a warning."""
    if not folders:
        return
    try:
        path = write_epoch_table(folders, campaign.dir / TABLE_CSV)
        err.print(f"epoch-time table: {path}")
    except (UserError, OSError, ValueError) as e:
        err.print(f"[yellow]epoch-time table not written:[/yellow] {e}")
    if not report:
        return
    try:
        from analyzers.report import collect_runs, write_report
    except ImportError:
        return
    try:
        runs, warnings = collect_runs([f.path for f in folders])
        page, _ = write_report(runs, campaign.dir / "report", warnings=warnings)
        err.print(f"report: {page}")
    except Exception as e:  # noqa: BLE001 - the runs are safe; the report can be made later with `tracer report`
        err.print(f"[yellow]report not written:[/yellow] {type(e).__name__}: {e}")


def write_epoch_table(folders: list[RunFolder], path: Path) -> Path:
    """The study's Tables 1 and 2 over the campaign's runs, written by the report's one table writer
    (`analyzers.report.tables.write_tables_csv`: repeats of one spec pooled, one row per spec)."""
    from analyzers.report.tables import write_tables_csv
    from analyzers.run.run import Run

    return write_tables_csv([Run.open(f) for f in folders], path)
