"""Deliberate mutations of core rules, and which test catches each.

    .venv/bin/python -m tests.mutations                    # every mutation; a table at the end
    .venv/bin/python -m tests.mutations gate-default cost-boundary   # some, by name
    .venv/bin/python -m tests.mutations --list

Each mutation replaces one exact piece of source text, in a copy of the working tree (never in
the tree itself), and runs the tests named for it against that copy with `-x`: the first
failure is the catch; if they all pass, the mutation survived. Beforehand the same tests run
on the unmutated copy and must pass, or a catch would mean nothing. A mutation whose text is
not found exactly once is stale and reported as such (exit code 1), so the list cannot rot
quietly; so is a mutation that does not compile. The tests use BATON_TEST_DATABASE_URL like
any run (see tests/conftest.py). Not part of the test suite: it takes a quarter of an hour.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Mutation:
    name: str
    rule: str
    path: str  # relative to the repo root
    before: str  # must occur exactly once in the file
    after: str
    tests: tuple[tuple[str, ...], ...]  # pytest argument lists, tried in order

    @property
    def what(self) -> str:
        def short(text: str) -> str:
            return " ".join(text.split())

        return f"`{short(self.before)}` → `{short(self.after)}`"


def _t(*args: str) -> tuple[str, ...]:
    return args


MUTATIONS: tuple[Mutation, ...] = (
    # --- the thirteen of the issue "The suite proves what it claims" -------------------------
    Mutation(
        "gate-default",
        "the gate's default: within one owner ALLOW, across owners ASK",
        "src/baton/access/gate.py",
        "    if owner_of(requester) == owner_of(assignee):",
        "    if owner_of(requester) != owner_of(assignee):",
        (_t("tests/api/test_gate.py"),),
    ),
    Mutation(
        "gate-tie-break",
        "the gate's tie-break: of two rules at one priority, the older decides",
        "src/baton/access/gate.py",
        "key=lambda r: (-r.priority, r.id)",
        "key=lambda r: (-r.priority, -r.id)",
        (_t("tests/api/test_gate.py"),),
    ),
    Mutation(
        "visibility-owners",
        "an owner sees its agents' tasks and no other owner's",
        "src/baton/store/tasks.py",
        '            f"{table}.assignee_owner = {owner}"\n'
        '            f" AND {table}.assignee_owner <> {table}.requester_owner",',
        '            f"{table}.assignee_owner <> {table}.requester_owner",',
        (_t("tests/api/test_authorization.py"),),
    ),
    Mutation(
        "visibility-agents",
        "an agent sees the tasks it requested or is assigned, no other",
        "src/baton/store/tasks.py",
        '        f"{table}.assignee = {agent} AND {table}.requester <> {agent}",',
        '        f"{table}.requester <> {agent}",',
        (_t("tests/api/test_authorization.py"),),
    ),
    Mutation(
        "visibility-runs",
        "a run is seen by its owner, that owner's agents and admin only",
        "src/baton/store/runs.py",
        '    """A run is seen by its owner, that owner\'s agents, and admin."""\n'
        "    if principal.is_admin:\n"
        '        return "TRUE"\n'
        '    return f"{table}.owner = {p(principal.owner)}"',
        '    """A run is seen by its owner, that owner\'s agents, and admin."""\n    return "TRUE"',
        (_t("tests/api/test_runs.py", "-k", "another_owner or visib"),),
    ),
    Mutation(
        "lease-expiry",
        "a claim's lease lasts BATON_RUN_LEASE_SECONDS",
        "src/baton/store/runs.py",
        "{p(holder)}, now() + {p(seconds)} * interval '1 second' \"",
        "{p(holder)}, now() + {p(seconds)} * interval '1 minute' \"",
        (_t("tests/store/test_run_queue.py"),),
    ),
    Mutation(
        "self-verification",
        "an agent never verifies its own work (the verifier is not the assignee agent)",
        "src/baton/access/principals.py",
        "    Actor.VERIFIER: Role(Side.REQUESTER, Reach.ACTS_FOR, not_the=Side.ASSIGNEE),",
        "    Actor.VERIFIER: Role(Side.REQUESTER, Reach.ACTS_FOR),",
        (_t("tests/api/test_authorization.py"),),
    ),
    Mutation(
        "pipeline-guard",
        "a pull request opens only at checkpoint summary_complete",
        "src/baton/protocol/pipeline.py",
        '        guard=Is("checkpoint", Cp.summary_complete),',
        "        guard=ALWAYS,",
        (_t("tests/protocol/test_pipeline.py"), _t("tests/store/test_runs_guard.py")),
    ),
    Mutation(
        "resume-guard",
        "resumeTask only while waiting on a person or an agent, never on the owner's approval",
        "src/baton/protocol/handoff.py",
        '_ON_OTHERS = Is("waiting_on", W.human, W.agent)',
        '_ON_OTHERS = Is("waiting_on", W.owner_approval, W.human, W.agent)',
        (_t("tests/protocol/test_handoff.py"), _t("tests/api/test_moves.py")),
    ),
    Mutation(
        "sweeper-recheck",
        "the sweeper moves a run only if its lease is still expired when it writes",
        "src/baton/store/runs.py",
        '        f"id = {key} AND EXISTS (SELECT 1 FROM run_leases l "\n'
        '        "WHERE l.run_id = runs.id AND l.expires_at < now())"',
        '        f"id = {key}"',
        (
            _t("tests/store", "-k", "sweep or lease or heartbeat"),
            _t("tests/live/test_runs_live.py", "-k", "sweep or lease or heartbeat"),
        ),
    ),
    Mutation(
        "cost-boundary",
        "an operation may cost exactly the budget (refused only past it)",
        "src/baton/engine/cost.py",
        "        if cost > budget:",
        "        if cost >= budget:",
        (_t("tests/engine/test_cost.py"),),
    ),
    # The issue counts thirteen but names eleven; these two complete the count.
    Mutation(
        "approve-guard",
        "approveTask and denyTask only while waiting on the owner's approval",
        "src/baton/protocol/handoff.py",
        '_ON_OWNER = Is("waiting_on", W.owner_approval)',
        '_ON_OWNER = Is("waiting_on", W.owner_approval, W.human)',
        (_t("tests/protocol/test_handoff.py"), _t("tests/api/test_moves.py")),
    ),
    Mutation(
        "gate-role",
        "the gate's moves (route, hold, reject, approve, deny) are the assignee's owner's",
        "src/baton/access/principals.py",
        "    Actor.GATE: Role(Side.ASSIGNEE, Reach.OWNS),",
        "    Actor.GATE: Role(Side.ASSIGNEE, Reach.ACTS_FOR),",
        (_t("tests/api/test_authorization.py"),),
    ),
    # --- more rules -----------------------------------------------------------------------
    Mutation(
        "version-conflict",
        "a move with a stale expectedVersion changes nothing",
        "src/baton/store/lifecycle.py",
        '        guards = [*guards, f"old.version = {version}"]',
        "        guards = [*guards]",
        (_t("tests/api/test_moves.py", "-k", "version"), _t("tests/store/test_concurrency.py")),
    ),
    Mutation(
        "idempotent-hand-off",
        "the same client id with different input is a duplicate, not the old task",
        "src/baton/services/tasks.py",
        "if existing is None or existing.input_digest != digest:",
        "if existing is None:",
        (_t("tests/api/test_gate.py", "-k", "repeated or duplicate or same_id or client_id"),),
    ),
    Mutation(
        "reserved-handles",
        "the owner names admin and system are reserved",
        "src/baton/protocol/task_object.py",
        'RESERVED_OWNERS = frozenset({"admin", "system", ""})',
        'RESERVED_OWNERS = frozenset({""})',
        (_t("tests/api/test_reserved_names.py"), _t("tests/access/test_tokens.py")),
    ),
    Mutation(
        "token-expiry",
        "an expired token grants nothing",
        "src/baton/access/tokens.py",
        '"AND (expires_at IS NULL OR expires_at > now())"',
        '"AND TRUE"',
        (_t("tests/access/test_tokens.py"),),
    ),
    Mutation(
        "token-revocation",
        "a revoked token grants nothing",
        "src/baton/access/tokens.py",
        '"FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL "',
        '"FROM api_tokens WHERE token_hash = $1 "',
        (_t("tests/access/test_tokens.py"),),
    ),
    Mutation(
        "lease-holder",
        "only the lease's holder, the run's owner or admin extends a lease",
        "src/baton/store/runs.py",
        '    may = "TRUE" if principal.is_admin else f"l.holder = {holder}"',
        '    may = "TRUE"',
        (_t("tests/store/test_run_queue.py", "-k", "holder"),),
    ),
    Mutation(
        "owner-only-run-events",
        "answers, interrupts, resumes and reruns are the run's owner's, not its agents'",
        "src/baton/store/runs.py",
        "    if actor is RunActor.OWNER and principal.kind is not PrincipalKind.OWNER:\n"
        '        return "FALSE"\n',
        "",
        (_t("tests/api/test_runs.py", "-k", "owner_alone"),),
    ),
    Mutation(
        "checkpoint-states",
        "saveCheckpoint only while the task is accepted, working or waiting",
        "src/baton/protocol/handoff.py",
        "frozenset({S.accepted, S.working, S.waiting})",
        "frozenset({S.accepted, S.working, S.waiting, S.verifying})",
        (_t("tests/api/test_moves.py", "-k", "checkpoint"),),
    ),
    Mutation(
        "live-visibility",
        "a subscriber never receives events of tasks it cannot read",
        "src/baton/live/filters.py",
        "    may_see=lambda principal, task: principal.sees(\n"
        "        requester=task.requester, assignee=task.assignee\n"
        "    ),",
        "    may_see=lambda principal, task: True,",
        (_t("tests/live/test_subscriptions.py", "-k", "cannot_read"),),
    ),
    # The end-to-end answer does not show this one (Strawberry's resolvers default to the same
    # values): the coercion's own comparison with graphql-core does.
    Mutation(
        "argument-defaults",
        "an absent argument or input field takes its default, as graphql-core's coercion does",
        "src/baton/engine/argument_values.py",
        "    return OMIT if default is Undefined else default",
        "    return OMIT",
        (_t("tests/engine/test_argument_values.py"),),
    ),
    Mutation(
        "argument-null",
        "a null variable for a non-null argument is graphql-core's error, not a null argument",
        "src/baton/engine/argument_values.py",
        "            return Undefined if required else default()\n"
        "        if value is None and non_null:\n"
        "            return Undefined\n"
        "        return value\n"
        "\n"
        "    return get\n"
        "\n"
        "\n"
        "def _literal(",
        "            return Undefined if required else default()\n"
        "        return value\n"
        "\n"
        "    return get\n"
        "\n"
        "\n"
        "def _literal(",
        (_t("tests/engine/test_argument_values.py", "-k", "bad_argument"),),
    ),
)


@dataclass
class Outcome:
    mutation: Mutation
    verdict: str  # caught, SURVIVED, STALE, BROKEN, ERROR
    by: str = ""
    seconds: float = 0.0


def copy_tree(destination: Path) -> None:
    """The working tree as it is (tracked and untracked files, not ignored ones)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        relative = raw.decode()
        source = ROOT / relative
        if not source.is_file():  # deleted in the tree but still in the index
            continue
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def pytest(copy: Path, args: tuple[str, ...]) -> tuple[int, str]:
    """pytest on the copy (its own `src` and `tests` first on the path, in child processes
    too): exit code and output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy / "src"), str(copy)])}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-rfE"]
    try:
        done = subprocess.run(
            [*command, *args],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
    except subprocess.TimeoutExpired as exc:
        return -1, f"timed out after {exc.timeout:g} s"
    return done.returncode, done.stdout + done.stderr


def first_failure(output: str) -> str:
    found = re.search(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)
    return found.group(1) if found else ""


def run_mutation(copy: Path, mutation: Mutation) -> Outcome:
    path = copy / mutation.path
    original = path.read_text()
    if original.count(mutation.before) != 1:
        found = original.count(mutation.before)
        return Outcome(mutation, "STALE", f"its text occurs {found} times in {mutation.path}")
    mutated = original.replace(mutation.before, mutation.after)
    try:
        compile(mutated, str(path), "exec")
    except SyntaxError as exc:
        return Outcome(mutation, "BROKEN", f"does not compile: {exc}")
    started = time.monotonic()
    path.write_text(mutated)
    try:
        for args in mutation.tests:
            code, output = pytest(copy, args)
            if code == 0:
                continue
            took = time.monotonic() - started
            if code in (1, 2) and (test := first_failure(output)):
                return Outcome(mutation, "caught", test, took)
            tail = output.strip().splitlines()[-1:] or [""]
            return Outcome(mutation, "ERROR", f"pytest exit {code}: {tail[0]}", took)
        return Outcome(mutation, "SURVIVED", "", time.monotonic() - started)
    finally:
        path.write_text(original)


def baseline(copy: Path, mutations: list[Mutation]) -> list[str]:
    """Each distinct test selection on the unmutated copy; what failed."""
    problems = []
    for args in dict.fromkeys(a for m in mutations for a in m.tests):
        print(f"mutations: baseline {' '.join(args)}", file=sys.stderr, flush=True)
        code, output = pytest(copy, args)
        if code != 0:
            problems.append(
                f"{' '.join(args)}: exit {code}, {first_failure(output) or output[-500:]}"
            )
    return problems


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| rule | mutation | caught? | by |",
        "| --- | --- | --- | --- |",
    ]
    for o in outcomes:
        caught = "yes" if o.verdict == "caught" else f"**{o.verdict}**"
        lines.append(
            f"| {o.mutation.rule} (`{o.mutation.name}`) | {o.mutation.what} | {caught} | "
            f"{o.by.replace('|', '/')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutations", description=__doc__)
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--keep", action="store_true", help="keep the copy of the tree")
    args = parser.parse_args(argv)
    known = {m.name: m for m in MUTATIONS}
    if args.list:
        for m in MUTATIONS:
            print(f"{m.name:24} {m.rule}")
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"no such mutation: {', '.join(unknown)}")
    chosen = [known[n] for n in args.names] if args.names else list(MUTATIONS)

    copy = Path(tempfile.mkdtemp(prefix="baton-mutations-", dir="/tmp"))
    try:
        copy_tree(copy)
        if not args.no_baseline:
            problems = baseline(copy, chosen)
            if problems:
                print("mutations: the unmutated tests fail; nothing to measure:", file=sys.stderr)
                print("\n".join(problems), file=sys.stderr)
                return 1
        outcomes = []
        for mutation in chosen:
            print(f"mutations: {mutation.name}", file=sys.stderr, flush=True)
            outcome = run_mutation(copy, mutation)
            print(
                f"mutations: {mutation.name}: {outcome.verdict} {outcome.by} "
                f"({outcome.seconds:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            outcomes.append(outcome)
    finally:
        if args.keep:
            print(f"mutations: the copy is in {copy}", file=sys.stderr)
        else:
            shutil.rmtree(copy, ignore_errors=True)
    print(table(outcomes))
    caught = sum(o.verdict == "caught" for o in outcomes)
    print(f"\n{caught} of {len(outcomes)} caught")
    return 0 if all(o.verdict in ("caught", "SURVIVED") for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
