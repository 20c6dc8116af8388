"""``course report``: the class at a glance (grader/report/class_report.py,
class_report_html.py, similarity.py, records.py) and the stable mistake keys it counts
(course/testcells.py, the judge's reply).

The fast tests use a generated class (``benchmarks/class_report_speed.py``: planted mistakes,
blanks and copied pairs); the slow one reads the graded demo class of ``tests/conftest.py``,
where every graded demo student with a typical mistake must appear under it, and the two
students who copied from each other (``demo/a_masks/copied_pair_*``) top the list of
submissions that look alike.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from benchmarks.class_report_speed import ASSIGNMENT, NOTEBOOK, make_class
from course import contract
from course.testcells import GradingError, check_against_reference, check_close, fail
from grader.command.cli import main
from grader.coordinator import demo
from grader.report import class_report, class_report_html, similarity
from grader.shared import records
from grader.shared.verification import Verification
from tests.conftest import REPO, pipeline_students


# ----------------------------------------------------------------------------- mistake keys
def _key(call: object) -> str:
    with pytest.raises(GradingError) as caught:
        call()  # type: ignore[operator]
    return caught.value.mistake


def _transposed(size: int) -> None:
    from course.a_masks import checks

    mask = torch.tril(torch.full((size, size), float("-inf")), diagonal=-1)
    checks.diagnose_causal_mask_result(mask, size)


def test_a_check_gives_one_key_whatever_the_numbers_in_its_message() -> None:
    keys = {_key(lambda n=n: _transposed(n)) for n in (2, 3, 7)}
    (key,) = keys
    assert key.startswith("course.a_masks.checks:") and not re.search(r"\s", key)


def test_a_key_given_by_the_check_is_kept() -> None:
    assert _key(lambda: fail("its message 12", mistake="my-key")) == "my-key"


def test_a_mistakes_table_entry_has_a_key_without_its_numbers() -> None:
    table = {"summed over 3 heads instead of averaged": torch.zeros(2)}

    def wrong(n: int) -> None:
        check_against_reference(torch.zeros(2), torch.ones(2), f"out({n})", table)

    first, second = _key(lambda: wrong(1)), _key(lambda: wrong(5))
    assert first == second and first.endswith("#summed-over-heads-instead-of-averaged")


def test_generic_checks_say_where_they_were_asked_and_a_hint_names_the_mistake() -> None:
    def plain() -> None:
        check_close(torch.zeros(2), torch.ones(2), "x")

    def hinted() -> None:
        check_close(torch.zeros(2), torch.ones(2), "x", hint="did you forget the bias?")

    generic, named = _key(plain), _key(hinted)
    assert generic.startswith("generic:course.testcells:check_close") and "@" in generic
    assert class_report.is_generic(generic) and not class_report.is_generic(named)
    assert "hinted" in named


def test_the_judges_reply_carries_the_mistakes_and_an_old_reply_reads_as_none() -> None:
    mistakes = {"test_a": {"key": "k", "message": "m"}}
    line = contract.verdicts_line({"test_a": "m", "test_b": None}, mistakes)
    assert contract.read_reply(line) == ({"test_a": "m", "test_b": None}, "")
    assert contract.read_mistakes(line) == mistakes
    assert contract.read_mistakes('{"verdicts": {"test_a": null}}\n') == {}


def test_a_record_keeps_each_notebooks_verdicts_and_the_time(tmp_path: Path) -> None:
    first = verification_of({"test_a": "wrong"}, {"test_a": {"key": "k", "message": "wrong"}})
    records.write(tmp_path, "a", "ann", records.of(7.5, {"one": first}))
    records.add_notebook(tmp_path, "a", "ann", "two", verification_of({"test_b": None}, {}))
    records.add_notebook(tmp_path, "a", "bob", "one", first)  # plain nbgrader: no time
    kept = records.read_all(tmp_path, "a")
    assert kept["ann"]["seconds"] == 7.5 and set(kept["ann"]["notebooks"]) == {"one", "two"}
    assert kept["ann"]["notebooks"]["one"]["mistakes"]["test_a"]["key"] == "k"
    assert kept["bob"]["seconds"] == 0.0 and list(kept["bob"]["notebooks"]) == ["one"]


def verification_of(verdicts: dict, mistakes: dict) -> Verification:
    return Verification(verdicts=verdicts, mistakes=mistakes)


# ----------------------------------------------------------------------------- similarity
ORIGINAL = """
def padding(lengths, max_len):
    # positions compared with each length
    steps = torch.arange(max_len).repeat(lengths.shape[0], 1)
    limits = lengths.reshape(-1, 1).repeat(1, max_len)
    padded = steps.ge(limits)
    return padded.bool()
"""
RENAMED = """
def make_mask(lens, n):
    idx = torch.arange(n).repeat(lens.shape[0], 1)   # my own comment
    bounds = lens.reshape(-1, 1).repeat(1, n)

    out = idx.ge(bounds)
    return out.bool()
"""
OTHER = """
def padding(lengths, max_len):
    return torch.arange(max_len)[None, :] >= lengths[:, None]
"""


def test_renamed_and_recommented_code_has_the_same_tokens() -> None:
    assert [t.text for t in similarity.tokens(ORIGINAL)] == [
        t.text for t in similarity.tokens(RENAMED)
    ]
    texts = {t.text for t in similarity.tokens(ORIGINAL)}
    assert {"torch", "arange", "repeat", "ge", "V"} <= texts and "steps" not in texts


def test_copied_code_is_found_and_other_code_is_not() -> None:
    subs = [
        similarity.submission("ann", ORIGINAL),
        similarity.submission("bob", RENAMED),
        similarity.submission("cat", OTHER),
    ]
    pairs = similarity.alike(subs, threshold=0.5)
    assert [(p.a, p.b) for p in pairs] == [("ann", "bob")]
    assert pairs[0].share_a > 0.8 and pairs[0].lines_a and pairs[0].lines_b


def test_a_passage_many_students_share_counts_for_no_pair() -> None:
    subs = [similarity.submission(f"s{n}", ORIGINAL) for n in range(8)]
    assert similarity.common_limit(8) < 8 and similarity.alike(subs, threshold=0.01) == []


def test_the_instructors_own_solution_counts_for_no_pair() -> None:
    subs = [similarity.submission("ann", ORIGINAL), similarity.submission("bob", RENAMED)]
    given = similarity.submission("", OTHER + ORIGINAL)
    assert similarity.alike(subs, threshold=0.01, given=given) == []
    assert similarity.alike(subs, threshold=0.01, given=similarity.submission("", OTHER))


PUBLISHED = """def apply_rotary(x, base=10000.0):
    \"\"\"The stub's docstring.\"\"\"
    length, width = x.shape[-2], x.shape[-1]
    two_i = torch.arange(0, width, 2, dtype=torch.float64, device=x.device)
    position = torch.arange(length, dtype=torch.float64, device=x.device)
    angle = torch.outer(position, base ** (-two_i / width))
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    turned = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1)
    return turned.flatten(-2)
"""
STUB = {"def apply_rotary(x, base=10000.0):", '"""The stub\'s docstring."""'}
DISGUISED = """def apply_rotary(x, base=10000.0):
    \"\"\"The stub's docstring.\"\"\"
    # my own way
    n, d = x.shape[-2], x.shape[-1]  # sizes
    evens = torch.arange(0, d, 2, dtype=torch.float64, device=x.device)
    where = torch.arange(n, dtype=torch.float64, device=x.device)
    theta = torch.outer(where, base ** (-evens / d))  # angles
    c, s = theta.cos().to(x.dtype), theta.sin().to(x.dtype)
    first, second = x[..., 0::2], x[..., 1::2]
    out = torch.stack([first * c - second * s, first * s + second * c], dim=-1)
    return out.flatten(-2)
"""
INDEPENDENT = """def apply_rotary(x, base=10000.0):
    \"\"\"The stub's docstring.\"\"\"
    *lead, length, d = x.shape
    pairs = torch.view_as_complex(x.reshape(*lead, length, d // 2, 2).contiguous())
    exponent = 2 * torch.arange(d // 2, dtype=x.dtype) / d
    angle = torch.arange(length, dtype=x.dtype)[:, None] / base**exponent
    turned = pairs * torch.polar(torch.ones_like(angle), angle)
    return torch.view_as_real(turned).reshape(x.shape)
"""


def test_a_disguised_copy_of_the_published_solution_is_marked_an_independent_one_not() -> None:
    solution = similarity.own_tokens([(PUBLISHED, STUB)])
    code = {
        name: {"rotary": similarity.own_tokens([(text, STUB)])}
        for name, text in (("copy", DISGUISED), ("own", INDEPENDENT))
    }
    found = similarity.near_published(code, {"rotary": solution}, least=40)
    assert [(n.student, n.exercise) for n in found] == [("copy", "rotary")]
    assert found[0].share > 0.9
    assert similarity.published_share(code["own"]["rotary"], solution) < 0.3
    # an exercise shorter than the least: never marked, even for the solution itself
    assert similarity.near_published(code, {"rotary": solution}, least=len(solution) + 1) == []


def test_code_that_does_not_tokenize_is_read_word_by_word() -> None:
    broken = ORIGINAL + '\n    x = "unfinished\n    (('
    found = similarity.tokens(broken)
    assert len(found) > len(similarity.tokens(ORIGINAL)) and found[0].text == "def"


# ----------------------------------------------------------------------------- the class
@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("class") / "course"
    planted = make_class(root, 30, pairs=3, seed=4)
    feedback = root / "feedback" / "s0001" / ASSIGNMENT / f"{NOTEBOOK}.html"
    feedback.parent.mkdir(parents=True)
    feedback.write_text("<html>feedback</html>")
    return root, planted


def test_each_planted_mistake_is_counted_with_its_students(synthetic: tuple) -> None:
    root, planted = synthetic
    data = class_report.gather(root, ASSIGNMENT)
    found = {m.key: m.students for ms in data.mistakes.values() for m in ms}
    assert {f"synthetic:{who}": students for who, students in planted["mistakes"].items()} == found
    for mistakes in data.mistakes.values():
        counts = [len(m.students) for m in mistakes]
        assert counts == sorted(counts, reverse=True)


def test_the_copied_pairs_top_the_similarity_list(synthetic: tuple) -> None:
    root, planted = synthetic
    data = class_report.gather(root, ASSIGNMENT)
    top = {(p.a, p.b) for p in data.pairs[: len(planted["pairs"])]}
    assert top == set(planted["pairs"])


def test_the_page_marks_copies_of_the_published_solution_for_review(
    synthetic: tuple, tmp_path: Path
) -> None:
    """Students of the generated class who wrote the reference's own long exercises (their
    names changed) are listed, for review; the page says it is no verdict."""
    root, _ = synthetic
    data = class_report.gather(root, ASSIGNMENT)
    assert data.published and {n.exercise for n in data.published} <= {"pe", "rotary"}
    assert all(n.share >= similarity.PUBLISHED_SHARE for n in data.published)
    text = class_report_html.page(data, tmp_path / "page.html")
    assert "Close to the published solution: to review" in text and "never a verdict" in text


def test_the_page_is_self_contained_and_says_how_it_compares(synthetic: tuple) -> None:
    root, _ = synthetic
    out = root / "reports" / "class.html"
    assert main(["--root", str(root), "report", ASSIGNMENT, "--out", str(out)]) == 0
    page = out.read_text()
    assert "to look at" in page and "winnowing" in page.lower() and "30%" in page
    assert not re.search(r"""(src|href)=["'](https?:|//)""", page)  # nothing fetched
    assert page.count('src="data:image/png;base64,') >= 5  # 4 exercises, the times...
    assert 'href="../feedback/s0001/a_masks/masks_and_positions.html"' in page
    assert "timed out" in page and "answers graded so far" in page


def test_passed_visible_failed_hidden_and_blank_are_counted() -> None:
    exercises = class_report.exercises_of(
        NOTEBOOK, class_report._release(REPO, ASSIGNMENT, NOTEBOOK)
    )
    mask = exercises[0]
    assert (mask.name, mask.visible, mask.hidden) == (
        "mask",
        ["test_mask_visible"],
        ["test_mask_hidden"],
    )
    grades = {
        ("ann", NOTEBOOK, "test_mask_visible"): (1.0, 1.0, False, "code"),
        ("ann", NOTEBOOK, "test_mask_hidden"): (0.0, 2.0, False, "code"),
        ("bob", NOTEBOOK, "test_mask_visible"): (1.0, 1.0, False, "code"),
        ("bob", NOTEBOOK, "test_mask_hidden"): (2.0, 2.0, False, "code"),
    }
    data = class_report.ClassData(
        ASSIGNMENT, ["ann", "bob"], exercises, grades, {}, {}, [], {}, {}, [], {}
    )
    assert class_report_html.visible_not_hidden(data, mask) == {"ann"}
    assert class_report_html.points_of(data, mask) == {"ann": 1.0, "bob": 3.0}


def test_a_clear_message_without_a_gradebook_or_with_a_wrong_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "course"
    make_course = __import__("tests.conftest", fromlist=["make_course_copy"]).make_course_copy
    make_course(root, with_release=True)
    assert main(["--root", str(root), "report", ASSIGNMENT]) == 2
    assert "run `course autograde a_masks` first" in capsys.readouterr().err
    assert main(["--root", str(root), "report", ASSIGNMENT, "--threshold", "3"]) == 2
    assert "between 0 and 1" in capsys.readouterr().err
    assert main(["--root", str(root), "report", "z_none"]) == 2
    assert "unknown assignment" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the demo class
@pytest.mark.slow
def test_the_demo_class_report(graded_class: Path, tmp_path: Path) -> None:
    """Each graded demo student with a typical mistake is under a named mistake of its exercise
    whose message names it; the copied pair tops the similarity list."""
    for assignment in ("a_masks", "b_attention"):
        kept = records.read_all(graded_class, assignment)
        assert kept and all(r["seconds"] > 0 for r in kept.values())
        data = class_report.gather(graded_class, assignment)
        described = demo.descriptions(REPO, assignment)
        for student in pipeline_students(assignment):
            expect = described.get(student, {}).get("expect", {})
            if not expect.get("fail"):
                continue
            named = [
                m for ms in data.mistakes.values() for m in ms
                if m.named and student in m.students
            ]  # fmt: skip
            word = expect["message"].lower()
            assert any(word in m.message.lower() for m in named), (assignment, student, named)
    data = class_report.gather(graded_class, "a_masks")
    assert (data.pairs[0].a, data.pairs[0].b) == ("copied_pair_1", "copied_pair_2")
    out = class_report_html.write(graded_class, "a_masks", tmp_path / "report.html", 0.3)
    assert "copied_pair_1" in out.read_text()
