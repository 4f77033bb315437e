"""`handlers.console_form`: each field checked as it is typed against the
restricted form schema, asked again with what is allowed, and titled
choices offered by title while the raw value is sent."""

import pytest

from mcp_sync import handlers


def fill(spec, answers, *, required=True, name="f"):
    """Ask for one field `spec` with `answers` typed in turn: (content, everything said)."""
    typed = iter(answers)
    said = []

    def ask(prompt):
        said.append(prompt)
        return next(typed)

    schema = {"type": "object", "properties": {name: spec}, "required": [name] if required else []}
    result = handlers.console_form(ask=ask, tell=said.append)({"message": "m", "requestedSchema": schema})
    assert result["action"] == "accept"
    assert next(typed, None) is None, "not every answer was asked for"
    return result["content"], said


@pytest.mark.parametrize("spec, bad, said, good, value", [
    ({"type": "integer", "minimum": 1, "maximum": 9}, "12", "f takes a whole number from 1 to 9", "9", 9),
    ({"type": "integer", "minimum": 1}, "0", "f takes a whole number at least 1", "1", 1),
    ({"type": "number", "maximum": 2.5}, "2.6", "f takes a number at most 2.5", "2.5", 2.5),
    ({"type": "integer"}, "2.5", "f takes a whole number (integer)", "2", 2),
    ({"type": "number"}, "two", "f takes a number", "-1e3", -1000.0),
    ({"type": "number"}, "nan", "f takes a finite number", "7", 7),
    ({"type": "string", "minLength": 3}, "ab", "f takes text at least 3 characters", "abc", "abc"),
    ({"type": "string", "minLength": 1, "maxLength": 3}, "abcd", "f takes text from 1 to 3 characters", "abc", "abc"),
    ({"type": "boolean"}, "maybe", "f takes yes or no (y/n, true/false)", "No", False),
    ({"type": "string", "format": "email"}, "ada at example.com",
     "f takes an email address (name@example.com)", "ada@example.com", "ada@example.com"),
    ({"type": "string", "format": "uri"}, "example.com/x",
     "f takes a URI with its scheme (https://example.com/page)", "https://example.com/x", "https://example.com/x"),
    ({"type": "string", "format": "date"}, "2026-02-30", "f takes a date as YYYY-MM-DD", "2026-02-28", "2026-02-28"),
    ({"type": "string", "format": "date"}, "20260228", "f takes a date as YYYY-MM-DD", "2026-02-28", "2026-02-28"),
    ({"type": "string", "format": "date-time"}, "2026-02-28 10:00",
     "f takes a date and time with its zone, as YYYY-MM-DDTHH:MM:SSZ or ...+02:00",
     "2026-02-28T10:00:00+02:00", "2026-02-28T10:00:00+02:00"),
    ({"type": "string", "enum": ["red", "green"]}, "blue", "f takes one of red, green", "GREEN", "green"),
])
def test_a_value_the_schema_refuses_is_asked_again_saying_what_is_allowed(spec, bad, said, good, value):
    content, told = fill(spec, [bad, good])
    assert content == {"f": value}
    assert said in told
    assert told.count(told[1]) == 2  # the same prompt, asked again


def test_integers_stay_integers_and_numbers_may_be_whole():
    assert fill({"type": "number"}, ["7"])[0] == {"f": 7} and isinstance(fill({"type": "number"}, ["7"])[0]["f"], int)
    assert fill({"type": "boolean"}, ["y"])[0] == {"f": True}


def test_the_prompt_shows_the_description_what_is_allowed_and_the_default():
    spec = {"type": "integer", "title": "Guests", "description": "How many\npeople come", "minimum": 1,
            "maximum": 8, "default": 2}
    content, told = fill(spec, [""])
    assert content == {"f": 2}
    assert told[1:] == ["Guests: How many people come", "Guests (integer, from 1 to 8) [2]: "]


TITLED = [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}, {"const": "#00f", "title": "Blue"}]


@pytest.mark.parametrize("spec", [
    {"type": "string", "oneOf": TITLED},
    {"type": "string", "anyOf": TITLED},
    {"type": "string", "enum": ["#f00", "#0f0", "#00f"], "enumNames": ["Red", "Green", "Blue"]},
])
@pytest.mark.parametrize("typed", ["green", "GREEN", "2", "#0f0"])
def test_titled_choices_by_title_number_or_value_send_the_value(spec, typed):
    content, told = fill(spec, [typed])
    assert content == {"f": "#0f0"}
    assert told[1:5] == ["  1) Red", "  2) Green", "  3) Blue", "f (1-3, or a title): "]


def test_a_titled_choice_not_offered_lists_them_and_the_default_shows_by_title():
    content, told = fill({"type": "string", "oneOf": TITLED, "default": "#00f"}, ["purple", "4", ""])
    assert content == {"f": "#00f"}
    assert told.count("f takes one of 1) Red, 2) Green, 3) Blue") == 2
    assert "f (1-3, or a title) [Blue]: " in told


def test_a_multi_select_with_titles_sends_the_values_within_its_bounds():
    spec = {"type": "array", "minItems": 1, "maxItems": 2, "items": {"anyOf": TITLED}, "default": ["#f00"]}
    content, told = fill(spec, ["red, green, blue", "red, nope", "3, Red, 3"])
    assert content == {"f": ["#00f", "#f00"]}  # in the order typed, once each
    assert "f takes from 1 to 2 choices, separated by commas" in told
    assert "f takes one of 1) Red, 2) Green, 3) Blue" in told
    assert "f (1-3, or a title; several, separated by commas) [Red]: " in told


def test_a_multi_select_without_titles():
    spec = {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 2}
    content, told = fill(spec, ["a", "c,a"])
    assert content == {"f": ["c", "a"]}
    assert "f takes at least 2 choices, separated by commas" in told


def test_a_raw_value_that_looks_like_a_number_wins_over_the_numbering():
    spec = {"type": "string", "oneOf": [{"const": "2", "title": "Two"}, {"const": "1", "title": "One"}]}
    assert fill(spec, ["1"])[0] == {"f": "1"}
    assert fill(spec, ["two"])[0] == {"f": "2"}


def test_an_optional_field_left_empty_is_left_out_and_a_required_one_is_asked_again():
    assert fill({"type": "string"}, [""], required=False)[0] == {}
    content, told = fill({"type": "string", "title": "Name"}, ["  ", "Ada"])
    assert content == {"f": "Ada"} and "Name is required" in told


def test_every_answer_passes_the_clients_own_check_of_the_content():
    # What console_form accepts, the client's jsonschema check (done before
    # anything is sent) accepts too.
    import jsonschema

    schema = {"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"},
        "colors": {"type": "array", "items": {"anyOf": TITLED}, "maxItems": 2},
        "n": {"type": "number", "minimum": 0},
    }, "required": ["when", "colors", "n"]}
    typed = iter(["2026-01-01T00:00:00Z", "blue,1", "0.5"])
    result = handlers.console_form(ask=lambda p: next(typed), tell=lambda t: None)(
        {"message": "m", "requestedSchema": schema})
    jsonschema.validate(result["content"], schema, format_checker=jsonschema.FormatChecker())
    assert result["content"] == {"when": "2026-01-01T00:00:00Z", "colors": ["#00f", "#f00"], "n": 0.5}


# -- through the real command: `mcp-sync --answer ask` with stdin piped ---------------------------

SERVER = '''
from mcp_sync.testing import Server
from mcp_sync.testing.server import serve_stdio

server = Server()
SCHEMA = {"type": "object", "required": ["colour", "when"], "properties": {
    "colour": {"type": "string", "title": "Colour", "description": "The paint to use",
               "oneOf": [{"const": "#f00", "title": "Red"}, {"const": "#0f0", "title": "Green"}]},
    "when": {"type": "string", "format": "date"},
    "coats": {"type": "integer", "minimum": 1, "maximum": 3, "default": 1},
}}


@server.tool(description="Paint: asks which colour, when, and how many coats.")
def paint(args, ctx):
    answer = ctx.elicit("Painting the fence", SCHEMA)
    return repr(answer)


serve_stdio(server)
'''


def test_the_command_asks_checks_and_sends_the_raw_value(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    server = tmp_path / "server.py"
    server.write_text(SERVER)
    command = Path(sys.executable).parent / "mcp-sync"
    typed = "purple\ngreen\n2026-13-01\n2026-12-01\n5\n\n"
    proc = subprocess.run([str(command), "--answer", "ask", "call", "paint", "--", sys.executable, str(server)],
                          input=typed, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{'action': 'accept', 'content': {'colour': '#0f0', 'when': '2026-12-01', 'coats': 1}}"
    err = proc.stderr
    assert err.startswith("Painting the fence\nColour: The paint to use\n  1) Red\n  2) Green\n")
    assert "Colour takes one of 1) Red, 2) Green" in err
    assert "when takes a date as YYYY-MM-DD" in err
    assert "coats takes a whole number from 1 to 3" in err
    assert "coats (integer, from 1 to 3) [1] (optional): " in err


def test_the_command_cancels_at_end_of_input(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    server = tmp_path / "server.py"
    server.write_text(SERVER)
    command = Path(sys.executable).parent / "mcp-sync"
    proc = subprocess.run([str(command), "--answer", "ask", "call", "paint", "--", sys.executable, str(server)],
                          input="2\n", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{'action': 'cancel'}"


@pytest.mark.parametrize("text", ["2026-02-28T10:00:00.5Z", "2026-02-28T10:00:00.123456789+02:00",
                                  "2026-02-28t10:00:00z", "2026-02-28 10:00:00-05:00"])
def test_an_rfc3339_date_time_is_taken_with_any_fraction_on_every_python(text):
    # Python 3.10's fromisoformat refuses a fraction of other than 3 or 6 digits.
    content, told = fill({"type": "string", "format": "date-time"}, [text])
    assert content == {"f": text}  # taken at the first answer (`fill` checks every answer was used)
