"""The term's commands one by one (docs/term.md): the students' install address, a release that
says what it would change, due dates and extensions, grades out only when final, the demo in a
folder of its own. The whole term, graded, is tests/test_whole_term.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from packaging.requirements import Requirement

from grader.books import deadlines
from grader.command.cli import main
from grader.coordinator import demo
from grader.coordinator.release import worth
from grader.shared import reference_run
from grader.shared.paths import CourseError, assignments, db_url
from grader.term import address, final, midterm
from tests.conftest import REPO

A = "a_masks"
NOTEBOOK = "masks_and_positions.ipynb"
WHEEL = "https://uni.example/tc/transformers_course-0.1.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course with A released for a clone (the placeholder in its first cells)."""
    root = tmp_path_factory.mktemp("term") / "course"
    root.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copy(REPO / "reference_runs.json", root)
    shutil.copytree(REPO / "source" / A, root / "source" / A)
    shutil.copytree(REPO / "demo" / A, root / "demo" / A)
    assert main(["--root", str(root), "release", A, "--clone-only"]) == 0
    return root


@pytest.fixture
def course(released: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(released, tmp_path / "course"))


def first_cell(root: Path) -> str:
    notebook = json.loads((root / "release" / A / NOTEBOOK).read_text())
    return "".join(notebook["cells"][0]["source"])


def test_release_refuses_while_the_address_is_unset_and_writes_it_once_set(
    course: Path, capsys: pytest.CaptureFixture
) -> None:
    cli = ["--root", str(course)]
    assert main([*cli, "release", A]) == 2
    assert "`course address https://github.com/you/course`" in capsys.readouterr().err
    assert main([*cli, "address"]) == 1  # unset
    assert main([*cli, "address", "https://github.com/OWNER/REPO"]) == 2  # the placeholder
    assert main([*cli, "address", "https://github.com/me/tc"]) == 0
    assert address.configured(course) == "https://github.com/me/tc"
    assert main([*cli, "address", "https://github.com/you/other"]) == 0  # the one line, replaced
    config = (course / "nbgrader_config.py").read_text()
    assert config.count("c.Course.student_install =") == 1
    assert main([*cli, "release", A]) == 0
    package = "transformers-course @ git+https://github.com/you/other#subdirectory=student"
    assert f'package = "{package}"' in first_cell(course)
    assert "OWNER/REPO" not in first_cell(course)
    links = (course / "release" / "colab.md").read_text()
    assert "colab.research.google.com/github/you/other/blob/main/release/a_masks/" in links
    # a wheel: the install line names it; no Colab page (no GitHub repository)
    wheel = "https://uni.example/tc/transformers_course-0.1.0-py3-none-any.whl"
    assert main([*cli, "address", wheel]) == 0 and main([*cli, "release", A]) == 0
    assert f'package = "transformers-course @ {wheel}"' in first_cell(course)
    assert not (course / "release" / "colab.md").exists()


# Every form `course address` takes: what it writes, and a word of what it says.
ADDRESS_FORMS = {
    "https://github.com/me/tc": ("https://github.com/me/tc", ""),
    "https://github.com/me/tc.git": ("https://github.com/me/tc.git", ""),
    "https://git.uni.example/me/tc": ("https://git.uni.example/me/tc", ""),
    WHEEL: (WHEEL, ""),
    "file://localhost/srv/tc": ("file://localhost/srv/tc", ""),
    "file://localhost/srv/tc@0123abc": ("file://localhost/srv/tc@0123abc", ""),
    "git+https://github.com/me/tc": ("https://github.com/me/tc", "git+ dropped"),
    "git+file://localhost/srv/tc": ("file://localhost/srv/tc", "git+ dropped"),
    "file:///srv/tc": ("file://localhost/srv/tc", "file:/// written as file://localhost/"),
    "git+file:///srv/tc": ("file://localhost/srv/tc", "file:/// written as file://localhost/"),
    "git@github.com:me/tc.git": ("https://github.com/me/tc", "students' pip cannot use"),
    "git@github.com:me/tc": ("https://github.com/me/tc", "its public https form"),
    "ssh://git@github.com/me/tc.git": ("https://github.com/me/tc", "ssh address"),
    "git+ssh://git@github.com/me/tc": ("https://github.com/me/tc", "ssh address"),
}


def test_address_takes_every_form_pip_installs_from() -> None:
    for given, (written, note) in ADDRESS_FORMS.items():
        got = address.normalise(given)
        assert got[0] == written and note in got[1], (given, got)
        assert bool(note) == bool(got[1]), (given, got)
        assert address.check_address(written) == written  # what is written is taken as it is
    assert address.normalise(" clone ") == ("clone", "")


def test_address_refuses_what_pip_cannot_take_and_names_the_forms(course: Path) -> None:
    refused = {
        "github.com/me/x": "not an address",
        "https://x/y z": "a space",
        "ftp://x/y": "not an address",
        'https://x/"y': "a quote",
        "http://uni.example/transformers_course-0.1.0-py3-none-any.whl": "not an address",
        "file://server/srv/tc": "not an address",
        "git@gitlab.com:me/tc.git": "students' pip cannot use ssh keys",
        "ssh://git@git.uni.example/me/tc": "students' pip cannot use ssh keys",
        "https://github.com/me/tc/tree/main": "a page of a GitHub repository",
    }
    for bad, reason in refused.items():
        with pytest.raises(CourseError) as error:
            address.set_address(course, bad)
        said = str(error.value)
        assert reason in said, (bad, said)
        for form in ("https://github.com/you/course", "git@github.com:", "file://localhost/PATH",
                     "transformers_course-0.1.0-py3-none-any.whl", "'clone'"):  # fmt: skip
            assert form in said, (bad, said)
    with pytest.raises(CourseError, match="placeholder"):
        address.set_address(course, "git@github.com:OWNER/REPO.git")
    assert address.set_address(course, "clone").startswith("the notebooks are for a clone")
    assert address.require(course) == "clone"
    said = address.set_address(course, "file:///srv/tc")
    assert "file:/// written as file://localhost/" in said
    assert address.configured(course) == "file://localhost/srv/tc"
    said = address.set_address(course, "git@github.com:me/tc.git")
    assert "students' pip cannot use" in said and address.configured(course).startswith("https")
    # an older configuration's file:/// is refused at release, with the command that rewrites it
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text().replace("https://github.com/me/tc", "file:///srv/tc"))
    with pytest.raises(CourseError, match="`course address file:///srv/tc`"):
        address.require(course)


@pytest.fixture(scope="module")
def packaging_21_3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """packaging 21.3, what pip 23.2 (a fresh Python 3.11 venv's) vendors, installed apart."""
    folder = tmp_path_factory.mktemp("packaging-21.3")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "--target", str(folder), "packaging==21.3"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, f"pip could not install packaging 21.3:\n{done.stderr[-2000:]}"
    return folder


def test_the_install_line_written_is_one_a_fresh_venvs_pip_parses(
    course: Path, packaging_21_3: Path
) -> None:
    """Each form's line, as release writes it into the first cell, parsed by today's packaging
    and by packaging 21.3 (pip 23.2's), which refuses git+file:///PATH."""
    lines = []
    for given in ADDRESS_FORMS:
        address.set_address(course, given)
        address.address_release(course, A, address.configured(course))
        package = re.search(r'package = "([^"]+)"', first_cell(course))
        assert package, first_cell(course)
        lines.append(package.group(1))
        assert Requirement(lines[-1]).url == lines[-1].split(" @ ", 1)[1]
    check = (
        "import json, sys\nfrom packaging import __version__\n"
        "from packaging.requirements import InvalidRequirement, Requirement\n"
        "assert __version__ == '21.3', __version__\nbad = []\n"
        "for line in json.load(sys.stdin):\n"
        "    try:\n        Requirement(line)\n"
        "    except InvalidRequirement as error:\n        bad.append(str(error))\n"
        "print(json.dumps(bad))\n"
    )
    old = [json.dumps([*lines, "transformers-course @ git+file:///srv/tc#subdirectory=student"])]
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, "
                           f"{str(packaging_21_3)!r})\n" + check], input=old[0],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(done.stdout) == [
        "Invalid URL: git+file:///srv/tc#subdirectory=student"  # the form it rewrites, refused
    ], done.stdout


def add_submission(root: Path, student: str, when: datetime, manual: bool = True) -> None:
    """A graded submission in the gradebook, as autograding leaves it."""
    with warnings.catch_warnings(), Gradebook(db_url(root)) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_student(student)
        gb.add_submission(A, student, timestamp=when)
        for grade in gb.find_submission_notebook(NOTEBOOK[:-6], A, student).grades:
            grade.auto_score = grade.max_score if grade.auto_score is None else grade.auto_score
            grade.needs_manual_grade = manual and grade.cell.cell_type == "markdown"
        gb.db.commit()


def test_due_dates_extensions_and_lateness(course: Path, capsys: pytest.CaptureFixture) -> None:
    cli = ["--root", str(course)]
    assert main([*cli, "due", A, "2026-10-05 17:00", "--timezone", "Europe/Berlin"]) == 0
    assert "due 2026-10-05 15:00 UTC" in capsys.readouterr().out  # Berlin is UTC+2 in October
    due = datetime(2026, 10, 5, 15, 0)
    # an extension before the submission: kept apart until it is graded
    assert main([*cli, "extension", A, "kim", "--hours", "48"]) == 0
    assert "kept until the submission is graded" in capsys.readouterr().out
    assert json.loads((course / deadlines.PENDING).read_text()) == {f"{A}/kim": 48}
    add_submission(course, "kim", due + timedelta(hours=30))
    add_submission(course, "lou", due + timedelta(hours=2, minutes=5))
    deadlines.apply_pending(course, db_url(course), A, "kim")  # as grading.merge does
    assert not (course / deadlines.PENDING).exists()
    # an extension after grading goes straight to the gradebook
    add_submission(course, "max", due + timedelta(hours=1))
    assert main([*cli, "extension", A, "max", "--hours", "2"]) == 0
    lines = deadlines.lateness_lines(course)
    assert lines[0] == f"{A}: due 2026-10-05 15:00 UTC"
    assert "  kim: on time, extension 48 h" in lines
    assert "  lou: late by 2 h 05 min" in lines
    assert "  max: on time, extension 2 h" in lines
    assert main([*cli, "extension", A, "max", "--hours", "0"]) == 0
    assert "  max: late by 1 h 00 min" in deadlines.lateness_lines(course)
    assert main([*cli, "due", A, "next tuesday-ish"]) == 2
    assert "is not a date" in capsys.readouterr().err
    with pytest.raises(CourseError, match="no assignment 'z_x'"):
        deadlines.set_extension(course, "z_x", "kim", 1)


def test_grades_go_out_only_when_final(course: Path, capsys: pytest.CaptureFixture) -> None:
    add_submission(course, "ann", datetime(2026, 10, 1))
    add_submission(course, "bob", datetime(2026, 10, 1), manual=False)
    assert final.ungraded(course) == {A: ["ann"]}
    out = course / "grades-canvas.csv"
    argv = ["--root", str(course), "grades", "--lms", "canvas", "--out", str(out)]
    assert main(argv) == 2 and not out.exists()
    said = capsys.readouterr().err
    assert "written answers not graded yet for 1 students: ann" in said, said
    assert main([*argv, "--allow-ungraded"]) == 0 and out.exists()
    assert "exported anyway (--allow-ungraded)" in capsys.readouterr().out
    # a demo student in the term's gradebook (an older `make demo` graded here): refused by name
    add_submission(course, "mask_transposed", datetime(2026, 10, 1), manual=False)
    assert main([*argv, "--allow-ungraded"]) == 2
    assert "holds 1 demo students (mask_transposed)" in capsys.readouterr().err


@pytest.mark.slow  # releases A again: runs its notebook (14 to 21 s)
def test_a_release_with_submissions_says_what_changes_and_waits_for_force(
    course: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the changed notebook's reference run (its time limits) is not what this test is about
    monkeypatch.setattr(reference_run, "record", lambda root, assignment: None)
    add_submission(course, "ann", datetime(2026, 10, 1))
    cli = ["--root", str(course), "release", A, "--clone-only"]
    assert main(cli) == 0  # nothing changed: released again quietly
    assert midterm.changes(course, A) == []
    path = course / "source" / A / NOTEBOOK
    notebook = json.loads(path.read_text())
    hidden = markdown = None
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        if hidden is None and "### BEGIN HIDDEN TESTS" in text:
            hidden = cell["metadata"]["nbgrader"]["grade_id"]
            cell["source"] = text.replace("### BEGIN HIDDEN TESTS", "### BEGIN HIDDEN TESTS\n0")
        elif markdown is None and cell["cell_type"] == "markdown" and not cell["metadata"]:
            markdown = cell["id"]
            cell["source"] = text + " (fixed)"
    path.write_text(json.dumps(notebook, indent=1))
    before = (course / "release" / A / NOTEBOOK).read_text()
    assert main(cli) == 1
    said = capsys.readouterr().out
    assert f"test cell {hidden} changed (hidden)" in said, said
    assert f"text cell {markdown} changed" in said and "--force" in said
    assert (course / "release" / A / NOTEBOOK).read_text() == before  # nothing written
    assert main([*cli, "--force"]) == 0
    assert "2 cells changed; now `course regrade a_masks`" in capsys.readouterr().out
    log = json.loads((course / midterm.LOG).read_text())
    assert [entry["assignment"] for entry in log] == [A] and len(log[0]["changes"]) == 2
    assert midterm.changes(course, A) == []


@pytest.mark.slow  # releases A again: runs its notebook (14 to 21 s)
def test_a_release_with_an_address_reports_its_install_cell_only_when_the_address_changed(
    course: Path, capsys: pytest.CaptureFixture
) -> None:
    cli = ["--root", str(course)]
    assert main([*cli, "address", "https://github.com/me/tc"]) == 0
    assert main([*cli, "release", A]) == 0
    add_submission(course, "ann", datetime(2026, 10, 1))
    assert midterm.changes(course, A, "https://github.com/me/tc") == []
    assert main([*cli, "release", A]) == 0  # nothing changed: released again quietly
    assert "changed" not in capsys.readouterr().out and not (course / midterm.LOG).exists()
    assert main([*cli, "address", "https://github.com/me/moved"]) == 0
    assert main([*cli, "release", A]) == 1
    said = capsys.readouterr().out
    assert f"{NOTEBOOK}: code cell colab-install changed" in said, said
    assert said.count(" changed") == 1, said


def test_points_that_moved() -> None:
    before = {"ann": 10.0, "bob": 7.0, "cy": 3.0}
    after = {"ann": 10.0, "bob": 5.5, "dee": 4.0}
    assert midterm.moved(before, after) == [
        "bob: 7 -> 5.5 (-1.5)", "cy: no longer graded", "dee: new"
    ]  # fmt: skip


def test_the_demo_has_a_folder_of_its_own(course: Path) -> None:
    folder = demo.demo_course(course)
    assert folder == course / "demo-course" and demo.is_demo_course(folder)
    assert demo.demo_course(folder) == folder  # inside it, it is the demo's course
    assert (folder / "source" / A / NOTEBOOK).is_file() and (folder / "demo" / A).is_dir()
    assert db_url(folder) == f"sqlite:///{folder / 'gradebook.db'}"
    assert "mask_transposed" in demo.student_ids(course)
    assert final.demo_students(folder) == []  # demo students belong there


def test_the_term_guide_says_what_each_assignment_is_worth() -> None:
    """docs/term.md's table of points is what the source notebooks give (course release says
    the same)."""
    rows = [line for line in (REPO / "docs" / "term.md").read_text().splitlines()
            if line.startswith("| ") and line.split("|")[2].strip().isdigit()]  # fmt: skip
    table = {cells[0]: cells[1:] for cells in ([c.strip() for c in r.strip("|").split("|")]
                                               for r in rows)}  # fmt: skip
    assert sorted(table) == assignments(REPO)
    for assignment, (total, auto, by_hand) in table.items():
        words = f"{total} points: {auto} autograded, {by_hand.replace(' (', ' for ')[:-1]}"
        assert worth(REPO, assignment) == words + " written answers graded by hand", assignment


def test_forget_takes_an_extension_waiting_for_grading(course: Path) -> None:
    assert main(["--root", str(course), "extension", A, "kim", "--hours", "5"]) == 0
    assert main(["--root", str(course), "extension", A, "lou", "--hours", "7"]) == 0
    assert main(["--root", str(course), "forget", "kim", "--yes"]) == 0
    assert json.loads((course / deadlines.PENDING).read_text()) == {f"{A}/lou": 7}


GUIDE = """# The student's guide

Open a notebook [on Colab](../release/colab.md), or [from the list](../README.md#top) above; the
course's package is [student/](.) and its licence [here](LICENSE). Or install it yourself:

    pip install "transformers-course @ git+https://github.com/OWNER/REPO#subdirectory=student"
"""


def public_course(course: Path) -> None:
    """Small stand-ins for what a public copy takes from the course, and B as the repository has
    it (the placeholder in its release notebook's first cell; not released here)."""
    for name in ("course", "student"):
        (course / name).mkdir()
        (course / name / "__init__.py").write_text("")
    (course / "LICENSE").write_text("MIT")
    (course / "student" / "LICENSE").write_text("MIT, CC BY 4.0")
    (course / "README.md").write_text("# Transformers, a test course\n\nThe instructor's page.\n")
    for folder in ("source", "release"):
        shutil.copytree(REPO / folder / "b_attention", course / folder / "b_attention")


def relative_links(folder: Path) -> dict[str, list[str]]:
    """Every relative link of every Markdown page in ``folder``, by page."""
    found = {}
    for page in folder.rglob("*.md"):
        links = re.findall(r"\]\(([^)\s]+)\)", page.read_text())
        found[str(page.relative_to(folder))] = [
            link for link in links if not re.match(r"[a-z]+:|#", link)
        ]
    return found


def test_publish_writes_only_what_was_handed_out_and_never_the_solutions(
    course: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cli = ["--root", str(course)]
    public_course(course)
    public = tmp_path / "public"
    assert main([*cli, "publish", str(public)]) == 2  # no address yet
    assert main([*cli, "address", "git@github.com:me/public.git"]) == 0
    capsys.readouterr()
    assert main([*cli, "publish", str(public)]) == 2  # no guide
    assert "student/GUIDE.md is missing" in capsys.readouterr().err
    (course / "student" / "GUIDE.md").write_text(GUIDE)
    assert main([*cli, "publish", str(public)]) == 2  # A released before the address was set
    said = capsys.readouterr().err
    assert "still installs from the placeholder" in said and f"`course release {A}`" in said
    assert main([*cli, "publish", str(public), "b_attention"]) == 2  # never released
    assert "b_attention is not released this term" in capsys.readouterr().err
    assert not public.exists()  # nothing written by a refusal

    assert main([*cli, "release", A]) == 0
    assert main([*cli, "publish", str(public)]) == 0
    assert f"published {A}" in capsys.readouterr().out
    assert sorted(p.name for p in public.iterdir()) == [
        "LICENSE", "README.md", "course", "release", "student"
    ]  # fmt: skip
    assert sorted(p.name for p in (public / "release").iterdir()) == [A, "colab.md"]
    assert not list(public.rglob("source")) and not list(public.rglob("*.db"))
    line = "transformers-course @ git+https://github.com/me/public#subdirectory=student"
    assert line in "".join(
        json.loads((public / "release" / A / NOTEBOOK).read_text())["cells"][0]["source"]
    )
    readme = (public / "README.md").read_text()
    assert (
        readme.startswith("# Transformers, a test course\n") and "instructor's page" not in readme
    )
    assert readme.count(f'pip install "{line}"') == 2 and "OWNER" not in readme
    colab = f"https://colab.research.google.com/github/me/public/blob/main/release/{A}/{NOTEBOOK}"
    assert colab in readme and colab in (public / "release" / "colab.md").read_text()
    assert "b_attention" not in readme + (public / "release" / "colab.md").read_text()
    assert "Open a notebook [on Colab](release/colab.md)" in readme  # the guide's body, relinked
    assert "The student's guide" not in readme  # its title: the header's is the page's
    # every relative link of the public copy names a file it has
    for page, links in relative_links(public).items():
        for link in links:
            target = (public / page).parent / link.partition("#")[0]
            assert target.exists(), f"{page} links to {link}, which the public copy lacks"
    assert relative_links(public)["README.md"]  # there were links to check

    # a guide that links to a page the public copy lacks: refused, nothing written
    (course / "student" / "GUIDE.md").write_text(GUIDE + "\nSee [the term](../docs/term.md).\n")
    before = readme
    assert main([*cli, "publish", str(public)]) == 2
    assert "../docs/term.md" in capsys.readouterr().err
    assert (public / "README.md").read_text() == before
    (course / "student" / "GUIDE.md").write_text(GUIDE)

    # another address than the notebooks': refused until released again
    assert main([*cli, "address", "https://github.com/me/other"]) == 0
    assert main([*cli, "publish", str(public)]) == 2
    assert "does not install" in capsys.readouterr().err
    assert main([*cli, "address", "https://github.com/me/public"]) == 0

    # B released too (its gradebook record and its address, as `course release` leaves them),
    # and an earlier term's H in the public copy: A named alone keeps B, removes H
    with warnings.catch_warnings(), Gradebook(db_url(course)) as gb:
        warnings.simplefilter("ignore")
        gb.update_or_create_assignment("b_attention")
        gb.update_or_create_notebook("attention_and_layer", "b_attention")
    address.address_release(course, "b_attention", address.configured(course))
    assert main([*cli, "publish", str(public)]) == 0
    assert sorted(p.name for p in (public / "release").iterdir()) == [A, "b_attention", "colab.md"]
    shutil.copytree(REPO / "release" / "h_own_gpt", public / "release" / "h_own_gpt")
    capsys.readouterr()
    assert main([*cli, "publish", str(public), A]) == 0
    said = capsys.readouterr().out
    assert "kept as published before: b_attention" in said and "h_own_gpt" in said
    assert sorted(p.name for p in (public / "release").iterdir()) == [A, "b_attention", "colab.md"]
    assert "b_attention" in (public / "release" / "colab.md").read_text()
    assert main([*cli, "publish", str(course / "inside")]) == 2
    assert "inside the course" in capsys.readouterr().err
    assert main([*cli, "publish", str(public), "z_x"]) == 2
    assert "unknown assignment 'z_x'" in capsys.readouterr().err

    # a local repository's address: no Colab page, and B (published for the old one) removed
    assert main([*cli, "address", "file:///srv/tc"]) == 0 and main([*cli, "release", A]) == 0
    capsys.readouterr()
    assert main([*cli, "publish", str(public), A]) == 0
    assert "removed from" in capsys.readouterr().out
    assert sorted(p.name for p in (public / "release").iterdir()) == [A, "colab.md"]
    assert "File > Upload notebook" in (public / "release" / "colab.md").read_text()
    readme = (public / "README.md").read_text()
    assert (
        'pip install "transformers-course @ git+file://localhost/srv/tc#subdirectory=student"'
        in readme
    )
    assert "colab.research" not in readme and "b_attention" not in readme
    for page, links in relative_links(public).items():
        for link in links:
            assert ((public / page).parent / link.partition("#")[0]).exists(), (page, link)
