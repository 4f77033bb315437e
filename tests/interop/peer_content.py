"""The resources and the prompt both Python peer servers offer
(`official_server.py` on today's SDK, `py_sdk1_server.py` on 1.x releases).

Imported by those scripts, each run by the interpreter of its own venv (this
folder is first on `sys.path` when a script runs). It uses only the
`resource` and `prompt` decorators, which `FastMCP` (1.x) and `MCPServer`
(2.x) share, so each SDK registers the same things its own way. The
TypeScript peer (ts_sdk1_server.mjs) offers the same in its own language.
"""


def add_resources_and_prompt(app, greeting):
    """Register `note://hello` (the text `greeting`), the template
    `note://items/{item}` and the prompt `review` on `app`."""

    @app.resource("note://hello", mime_type="text/plain")
    def hello() -> str:
        return greeting

    @app.resource("note://items/{item}")
    def item(item: str) -> str:
        return f"item {item}"

    @app.prompt()
    def review(code: str) -> str:
        """Ask for a review."""
        return f"Please review:\n{code}"
