"""The stack configs of one plan are written all or nothing (`blueprints.core.journal`): `blueprint plan` killed with
SIGKILL while staging its files leaves the previous plan's files byte for byte, and killed while installing them
leaves a journal the next command replays; either way the next command says what it did and no temporary file (they
hold encrypted secrets and salts) stays behind, and git ignores them meanwhile. Found by a break-it pass: a kill
inside the write left a mix of old and new stack configs and hidden temp files, never cleaned or ignored."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from blueprints.core.errors import StackConfigError
from blueprints.core.journal import JOURNAL, LOCK, STAGING_DIR, recover, write_all
from tests.fuzz_inputs import ROOT, Project

#: The example the killed plan plans: the cheapest that writes several stack configs (its dev and prod), so the kill lands
#: between two of them.
REQUIREMENTS = "stacks/requirements/edge-classifier.yaml"
#: A plan killed after this many of its steps (staged files, or installed ones).
AFTER = 1

#: `blueprint plan` with a SIGKILL at the (AFTER+1)-th staged write or install (a rename out of the staging folder).
KILLED_PLAN = textwrap.dedent(f"""
    import os, signal, sys
    import blueprints.core.journal as journal
    phase, after = sys.argv[1], int(sys.argv[2])
    count = [0]
    def kill_after(real):
        def hook(*args):
            count[0] += 1
            if count[0] > after:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args)
        return hook
    if phase == "stage":
        journal._write = kill_after(journal._write)
    else:  # the renames out of the staging folder, not the journal's own (the commit point)
        real_replace = os.replace
        install = kill_after(real_replace)
        def replace(src, dst):
            staged = "{STAGING_DIR}" in str(src) and not str(src).endswith("{JOURNAL}.tmp")
            return install(src, dst) if staged else real_replace(src, dst)
        journal.os.replace = replace
    from blueprints.cli import app
    app(["plan", "{REQUIREMENTS}", "--as-of", "2026-12-01"])
""")


@pytest.fixture()
def project(tmp_path) -> Project:
    project = Project(tmp_path, with_examples=True)
    path = project.root / REQUIREMENTS
    path.write_text(path.read_text().replace("owner: retail-edge", "owner: ml-serving"))  # the new plan differs
    assert "owner: ml-serving" in path.read_text()
    return project


def _run(project: Project, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=project.root, env=env, capture_output=True, text=True,
                          timeout=300)


def _killed_plan(project: Project, phase: str) -> None:
    done = _run(project, "-c", KILLED_PLAN, phase, str(AFTER))
    assert done.returncode == -9, (done.returncode, done.stderr[-2000:])


def _stacks_command(project: Project) -> str:
    done = _run(project, "-m", "blueprints.cli", "stacks")
    assert done.returncode == 0, done.stderr
    return done.stderr


def _ignored(project: Project, path: str) -> bool:
    return subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", path]).returncode == 0


def test_a_plan_killed_while_staging_leaves_the_previous_plan_and_the_next_command_removes_what_it_staged(project):
    before = project.snapshot()
    _killed_plan(project, "stage")
    assert project.snapshot() == before  # not one stack config touched
    staged = project.stacks / STAGING_DIR
    assert sorted(p.name for p in staged.iterdir()) == [f"{i}.yaml" for i in range(AFTER)] + [LOCK]
    assert all(p.stat().st_mode & 0o077 == 0 for p in [staged, *staged.iterdir()])  # secrets: owner only
    assert _ignored(project, f"stacks/{STAGING_DIR}/0.yaml")
    note = _stacks_command(project)
    assert "undid a write" in note and "those of the write before" in note
    assert project.snapshot() == before and project.leftovers() == []


def test_a_plan_killed_while_installing_is_finished_by_the_next_command(project):
    before = project.snapshot()
    _killed_plan(project, "install")
    after_kill = project.snapshot()
    assert len([name for name in after_kill if after_kill[name] != before.get(name)]) <= AFTER  # old, bar one
    assert (project.stacks / STAGING_DIR / JOURNAL).is_file()  # committed: the rest waits in the staging folder
    note = _stacks_command(project)
    assert "finished a write" in note and "killed while installing" in note
    assert project.leftovers() == []
    finished = project.snapshot()
    # Every file of the plan is now the plan's: a plan run to the end writes the same bytes.
    outcome = project.run(["plan", REQUIREMENTS, "--as-of", "2026-12-01"])
    assert outcome.exit_code == 0, outcome.output
    assert project.snapshot() == finished and len([n for n in finished if finished[n] != before.get(n)]) > AFTER


def test_an_exception_inside_the_write_changes_nothing_and_leaves_no_staged_file(tmp_path, monkeypatch):
    import blueprints.core.journal as journal

    (tmp_path / "Pulumi.a-dev.yaml").write_text("old a\n")
    (tmp_path / "Pulumi.b-dev.yaml").write_text("old b\n")
    real, calls = journal._write, []

    def interrupted(path, data):
        calls.append(path)
        if len(calls) > 1:
            raise KeyboardInterrupt
        real(path, data)

    monkeypatch.setattr(journal, "_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_all(tmp_path, [(tmp_path / "Pulumi.a-dev.yaml", "new a\n"), (tmp_path / "Pulumi.b-dev.yaml", "new b\n")])
    assert (tmp_path / "Pulumi.a-dev.yaml").read_text() == "old a\n" and not (tmp_path / STAGING_DIR).exists()


def test_an_earlier_versions_temporary_file_is_removed_and_reported(tmp_path):
    stale = tmp_path / ".Pulumi.chat-assistant-prod.yaml.k2j3h4"
    stale.write_text("encryptionsalt: v1:abc\n")
    [note] = recover(tmp_path)
    assert str(stale) in note and "encrypted secrets" in note and not stale.exists()
    assert recover(tmp_path) == []


def test_a_folder_that_cannot_be_made_changes_nothing(tmp_path):
    (tmp_path / "stacks").write_text("a file where the folder goes")
    folder = tmp_path / "stacks" / "sub"
    with pytest.raises(StackConfigError, match="nothing was changed"):
        write_all(folder, [(folder / "Pulumi.a-dev.yaml", "new\n")])


def test_another_commands_write_in_progress_is_left_alone(tmp_path):
    """A staging folder whose lock another process holds is a write in progress, not a leftover: `recover` leaves it,
    and a second write is refused without touching it."""
    staging = tmp_path / STAGING_DIR
    staging.mkdir()
    (staging / "0.yaml").write_text("staged\n")
    held = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(staging / LOCK)!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline().strip() == "locked"
        assert recover(tmp_path) == [] and (staging / "0.yaml").is_file()
        with pytest.raises(StackConfigError, match="another blueprint command is writing"):
            write_all(tmp_path, [(tmp_path / "Pulumi.a-dev.yaml", "new\n")])
        assert (staging / "0.yaml").is_file() and not (tmp_path / "Pulumi.a-dev.yaml").exists()
    finally:
        held.kill()
        held.wait()
    assert "undid a write" in recover(tmp_path)[0] and not staging.exists()  # the holder died: a leftover now
