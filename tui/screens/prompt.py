"""A one-line question in a small modal: go to a node, export to a file."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label

from graphtrain_inspect.tui.escaping import plain


class PromptScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    PromptScreen { align: center middle; }
    PromptScreen > Vertical { width: 80; height: auto; border: thick $primary; background: $surface; padding: 1 2; }
    PromptScreen Label { margin-bottom: 1; }
    PromptScreen .hint { color: $text-muted; margin: 1 0 0 0; }
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt.cancel")]
    AUTO_FOCUS = "#prompt-input"  # focused as the screen opens: the name typed next goes there

    def __init__(
        self,
        title: str,
        *,
        value: str = "",
        placeholder: str = "",
        suggestions: list[str] | None = None,
        hint: str = "",
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.title_text = title
        self.value = value
        self.placeholder = placeholder
        self.suggestions = suggestions
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(plain(self.title_text))
            suggester = SuggestFromList(self.suggestions, case_sensitive=False) if self.suggestions else None
            yield Input(value=self.value, placeholder=self.placeholder, suggester=suggester, id="prompt-input")
            if self.hint:
                yield Label(plain(self.hint), classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
