"""A conversation: the history and the notepad of pages this system retrieved."""

from __future__ import annotations

from .._query import Query, Turn
from .._sync import run_sync
from ._navigator import Navigator
from ._result import Result


class Conversation:
    """Multi-turn retrieval with memory.

    >>> chat = Conversation(navigator)
    >>> first = chat.ask("My printer won't connect")
    >>> chat.reply("Which model is it?")        # the agent's turn, if you have it
    >>> second = chat.ask("A LaserJet 200")

    The notepad lists distinct page keys, most recent first; after each turn the page of the
    top-ranked passage moves to the front. It is built only from this system's own results.
    """

    def __init__(self, navigator: Navigator, k: int = 10) -> None:
        self.navigator = navigator
        self.k = k
        self.history: list[Turn] = []
        self.notepad: list[str] = []

    async def aask(self, text: str) -> Result:
        """Retrieve for the user's next turn, then remember the turn and the top page."""
        query = Query(text=text, history=tuple(self.history))
        result = await self.navigator.aretrieve(query, k=self.k, notepad=tuple(self.notepad))
        self.history.append(Turn("user", text))
        if result.hits:
            self.remember(result.hits[0].doc_key)
        return result

    def ask(self, text: str) -> Result:
        return run_sync(self.aask(text))

    def reply(self, text: str) -> None:
        """Record the agent's reply so the next query sees it among the last six turns."""
        self.history.append(Turn("agent", text))

    def remember(self, page_key: str) -> None:
        if page_key in self.notepad:
            self.notepad.remove(page_key)
        self.notepad.insert(0, page_key)
