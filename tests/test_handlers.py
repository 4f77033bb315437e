from mcp_sync import handlers

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "default": "Ada"},
    "guests": {"type": "integer", "default": 2},
    "ratio": {"type": "number", "default": 0.5},
    "vip": {"type": "boolean", "default": False},
    "seat": {"type": "string", "enum": ["window", "aisle"], "default": "aisle"},
}, "required": ["name"]}


def test_defaults_form_fills_every_default():
    answer = handlers.defaults_form({"message": "m", "requestedSchema": SCHEMA})
    assert answer == {"action": "accept", "content": {
        "name": "Ada", "guests": 2, "ratio": 0.5, "vip": False, "seat": "aisle"}}


def test_defaults_form_declines_when_a_required_field_has_no_default():
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert handlers.defaults_form({"message": "m", "requestedSchema": schema}) == {"action": "decline"}


def test_console_form_asks_each_field_converts_and_re_asks():
    answers = iter(["", "three", "3", "", "yes", "middle", "window"])
    said = []
    handler = handlers.console_form(ask=lambda prompt: (said.append(prompt), next(answers))[1], tell=said.append)
    result = handler({"message": "Book a table", "requestedSchema": SCHEMA})
    assert result == {"action": "accept", "content": {
        "name": "Ada", "guests": 3, "ratio": 0.5, "vip": True, "seat": "window"}}
    assert said[0] == "Book a table"
    assert "guests takes a whole number (integer)" in said
    assert "seat takes one of window, aisle" in said


def test_console_form_cancels_at_end_of_input():
    def eof(prompt):
        raise EOFError

    assert handlers.console_form(ask=eof, tell=lambda s: None)({"message": "m", "requestedSchema": SCHEMA}) == {
        "action": "cancel"}
