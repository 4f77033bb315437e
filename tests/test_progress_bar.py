"""`mcp_sync.progress_bar()`: tqdm when installed, a plain stderr bar otherwise."""

import gc
import io
import sys

import pytest

import mcp_sync
from mcp_sync import Progress
from mcp_sync.testing import Server, demo_server


class FakeTqdm:
    """Records what a tqdm bar is asked to do (tqdm itself is optional)."""

    made: list["FakeTqdm"] = []

    def __init__(self, total=None, desc=None, file=None):
        self.total, self.desc, self.n = total, desc, 0
        self.postfix: list[str] = []
        self.resets: list[float] = []
        self.closed = False
        FakeTqdm.made.append(self)

    def update(self, step):
        self.n += step

    def refresh(self):
        pass

    def reset(self, total=None):
        self.resets.append(total)
        self.total, self.n = total, 0

    def set_postfix_str(self, text, refresh=True):
        self.postfix.append(text)

    def close(self):
        self.closed = True


@pytest.fixture
def with_tqdm(monkeypatch):
    FakeTqdm.made = []
    tqdm_package = type(sys)("tqdm")
    auto = type(sys)("tqdm.auto")
    auto.tqdm = FakeTqdm
    tqdm_package.auto = auto
    monkeypatch.setitem(sys.modules, "tqdm", tqdm_package)
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    return FakeTqdm


@pytest.fixture
def without_tqdm(monkeypatch):
    # None in sys.modules makes `import tqdm.auto` raise ImportError.
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)


def counting_server() -> Server:
    server = Server()

    @server.tool(description="Report progress without a total.")
    def unknown_total(args, ctx):
        for step in (1, 2, 3):
            ctx.progress(step, None, f"item {step}")
        return "done"

    return server


def test_tqdm_is_used_when_installed_and_closed_at_the_total(with_tqdm):
    bar = mcp_sync.progress_bar("count")
    assert bar.uses_tqdm
    with mcp_sync.connect(demo_server()) as client:
        result = client.call_tool("countdown", {"steps": 4, "delay": 0}, progress=bar)
    assert result.text == "liftoff"
    (made,) = with_tqdm.made
    assert (made.total, made.desc, made.n) == (4, "count", 4)
    assert made.postfix[-1] == "step 4/4"
    assert made.closed and bar.closed


def test_the_one_liner_closes_when_the_call_returns_even_without_a_total(with_tqdm):
    with mcp_sync.connect(counting_server()) as client:
        client.call_tool("unknown_total", {}, progress=mcp_sync.progress_bar())
        gc.collect()  # not needed on CPython (the call held the only reference); harmless
        (made,) = with_tqdm.made
        assert made.closed and made.n == 3 and made.total is None


def test_with_closes_at_the_end_of_the_block(with_tqdm):
    with mcp_sync.connect(counting_server()) as client:
        with mcp_sync.progress_bar() as bar:
            client.call_tool("unknown_total", {}, progress=bar)
            assert not with_tqdm.made[0].closed
    assert with_tqdm.made[0].closed
    bar(Progress(progress=9))  # after close: ignored
    assert with_tqdm.made[0].n == 3


def test_a_total_that_changes_resets_the_bar(with_tqdm):
    bar = mcp_sync.progress_bar()
    bar(Progress(progress=1, total=10))
    bar(Progress(progress=5, total=20))
    made = with_tqdm.made[0]
    assert made.resets == [20] and (made.n, made.total) == (5, 20)
    bar.close()


def test_a_tqdm_that_cannot_draw_falls_back_to_the_plain_bar(with_tqdm, monkeypatch):
    def broken(**kwargs):
        raise ImportError("IProgress not found. Please update jupyter and ipywidgets.")

    monkeypatch.setattr(sys.modules["tqdm.auto"], "tqdm", broken)
    out = io.StringIO()
    with mcp_sync.progress_bar(file=out) as bar:
        bar(Progress(progress=1, total=2))
    assert not bar.uses_tqdm and "1/2" in out.getvalue()


def test_plain_bar_without_tqdm(without_tqdm, capsys):
    bar = mcp_sync.progress_bar("count")
    assert not bar.uses_tqdm
    with mcp_sync.connect(demo_server()) as client:
        client.call_tool("countdown", {"steps": 10, "delay": 0}, progress=bar)
    assert bar.closed
    err = capsys.readouterr().err
    # Not a terminal: whole lines, no carriage return, and for a fast
    # countdown only the first and the last.
    assert "\r" not in err
    assert err.splitlines() == ["count: [##......................] 1/10  10% step 1/10",
                                "count: [########################] 10/10 100% step 10/10"]


def test_plain_bar_without_a_total_and_the_one_liner(without_tqdm, capsys):
    with mcp_sync.connect(counting_server()) as client:
        client.call_tool("unknown_total", {}, progress=mcp_sync.progress_bar())
        gc.collect()
        err = capsys.readouterr().err
    # The first update draws; the last one is drawn on close.
    assert err == "1 item 1\n3 item 3\n"


def test_plain_bar_keeps_a_message_on_one_line():
    out = io.StringIO()
    with mcp_sync.progress_bar(file=out) as bar:
        bar(Progress(progress=0.5, total=1, message="two\nlines"))
    assert out.getvalue() == "[############............] 0.5/1  50% two lines\n"


def test_insisting_on_tqdm_without_it_is_a_clear_error(without_tqdm):
    with pytest.raises(ValueError, match="needs tqdm"):
        mcp_sync.progress_bar(plain=False)


def test_plain_true_ignores_tqdm(with_tqdm):
    out = io.StringIO()
    with mcp_sync.progress_bar(plain=True, file=out) as bar:
        bar(Progress(progress=1, total=1))
    assert not with_tqdm.made and out.getvalue().endswith("1/1 100%\n")


class Terminal(io.StringIO):
    def isatty(self):
        return True


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\x7f"


def test_a_servers_escapes_are_shown_not_sent_to_the_terminal():
    stream = Terminal()
    with mcp_sync.progress_bar(plain=True, file=stream) as bar:
        bar(Progress(progress=1, total=2, message="half" + HOSTILE))
    assert stream.getvalue() == ("\r[############............] 1/2  50% half\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x7f"
                                 "\n")


def test_the_tqdm_bar_gets_the_message_neutralised_too(with_tqdm):
    with mcp_sync.progress_bar() as bar:
        bar(Progress(progress=1, total=2, message="half" + HOSTILE))
    assert with_tqdm.made[0].postfix == ["half\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x7f"]


@pytest.fixture
def clock(monkeypatch):
    """The bar's clock, moved by hand."""
    now = [100.0]
    monkeypatch.setattr("mcp_sync.progress.time.monotonic", lambda: now[0])
    return now


def test_on_a_terminal_it_redraws_in_place_at_most_ten_times_a_second(clock):
    stream = Terminal()
    with mcp_sync.progress_bar(plain=True, file=stream) as bar:
        for step in range(1, 5):
            bar(Progress(progress=step, total=10))
            clock[0] += 1 / 16  # exact in binary: no rounding at the 0.1 s edge
    drawn = stream.getvalue()
    assert "\n" not in drawn[:-1] and drawn.endswith("\n")  # one line, ended at close
    assert [part.split()[1] for part in drawn.split("\r")[1:]] == ["1/10", "3/10", "4/10"]


def test_elsewhere_it_writes_a_line_at_most_once_a_second(clock):
    stream = io.StringIO()
    with mcp_sync.progress_bar(plain=True, file=stream) as bar:
        for step in range(1, 3001):
            bar(Progress(progress=step, total=3000))
            clock[0] += 1 / 1024  # about 3 seconds in all; exact in binary
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert [line.split()[1] for line in lines] == ["1/3000", "1025/3000", "2049/3000", "3000/3000"]


@pytest.mark.parametrize("value", ["yes", "", 0, 1])
def test_plain_is_true_false_or_none(value):
    """`plain="no"` drew the plain bar (a truthy string)."""
    with pytest.raises(TypeError, match="plain must be True, False or None"):
        mcp_sync.progress_bar(plain=value)


def test_a_huge_integer_from_a_server_neither_raises_nor_draws_a_huge_line():
    # 10**400 is valid JSON but no float: Progress.from_wire clamps it.
    server = Server()

    @server.tool
    def big(args, ctx):
        ctx.progress(10**400, 10)
        return "done"

    out = io.StringIO()
    with mcp_sync.connect(server) as client:
        assert client.call_tool("big", progress=mcp_sync.progress_bar(plain=True, file=out)).text == "done"
    assert out.getvalue() == "[########################] 1.8e+308/10 100%\n"


@pytest.mark.parametrize("progress", [
    Progress(progress=10**400), Progress(progress=-10**400, total=10**400), Progress(progress=float("nan"), total=3),
    Progress(progress=1, total=float("nan")), Progress(progress=float("inf"), total=float("inf")),
    Progress(progress=float("-inf"), total=2), Progress(progress=10**20, total=10**21),
])
def test_numbers_no_server_sends_properly_do_not_break_the_bar(progress):
    # Made by hand, these skip from_wire's clamping: the bar copes anyway.
    out = io.StringIO()
    with mcp_sync.progress_bar(plain=True, file=out) as bar:
        bar(progress)
    assert 0 < len(out.getvalue()) < 80, out.getvalue()
