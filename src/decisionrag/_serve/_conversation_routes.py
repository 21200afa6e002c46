"""``GET`` and ``DELETE /v1/conversations/{id}``: a key reads or forgets its own conversation.

A conversation is kept under (the calling key's identity, tree, id), so a key only ever
reaches its own: another key's conversation of the same id is simply not there (404), whether
the keys share a name or not. `tree` is a query parameter (default: the server's first tree).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Query

from ._auth import Principal
from ._conversations import ConversationKey
from ._errors import ServeError
from ._schemas import ConversationDeleted, ConversationOut, ConversationTurnOut, ErrorResponse

_ID = Path(min_length=1, max_length=128,
           description="the conversation_id given to /v1/retrieve or /v1/answer")
_TREE = Query(None, description="tree name (default: the server's first tree)")


def conversation_router(service: Any, principal: Any) -> APIRouter:
    """The conversation routes over the app's `service`, callers by `principal`."""
    router = APIRouter()
    caller = Depends(principal)

    def key_of(who: Principal, conversation_id: str, tree: str | None) -> tuple[str, ConversationKey]:
        name = tree or service.registry.default
        who.check(name)
        service.registry.current(name)  # 404 for a tree this server does not serve
        return name, (who.identity, name, conversation_id)

    @router.get("/v1/conversations/{conversation_id:path}", response_model=ConversationOut,
                tags=["conversations"], responses=_responses(404))
    async def read_conversation(conversation_id: str = _ID, tree: str | None = _TREE,
                                who: Principal = caller) -> ConversationOut:
        """The turns and notepad kept under this id for the calling key."""
        name, key = key_of(who, conversation_id, tree)
        store = service.conversations
        state = await store.aget(key, service.limits.state_timeout)
        if not state.history and not state.notepad:
            raise ServeError(404, "not_found", f"no conversation {conversation_id!r} on tree {name!r} "
                             "for this key (never started, forgotten, or idle past its TTL)",
                             field="conversation_id")
        turns = [ConversationTurnOut(role="user" if turn.role == "user" else "assistant", content=turn.text)
                 for turn in state.history]
        left = max(0.0, store.ttl - (store.clock() - state.touched))
        return ConversationOut(conversation_id=conversation_id, tree=name, messages=turns,
                               notepad=list(state.notepad), expires_in=round(left, 3))

    @router.delete("/v1/conversations/{conversation_id:path}", response_model=ConversationDeleted,
                   tags=["conversations"], responses=_responses())
    async def forget_conversation(conversation_id: str = _ID, tree: str | None = _TREE,
                                  who: Principal = caller) -> ConversationDeleted:
        """Forget the conversation kept under this id for the calling key (idempotent)."""
        name, key = key_of(who, conversation_id, tree)
        deleted = await service.conversations.adelete(key, service.limits.state_timeout)
        return ConversationDeleted(conversation_id=conversation_id, tree=name, deleted=deleted)

    return router


def _responses(*more: int) -> dict[int | str, dict[str, Any]]:
    described = {
        401: "no API key, or an unknown one", 403: "the key is not allowed on this tree",
        404: "no such tree, or no such conversation for this key",
        422: "a field is invalid", 429: "the key is over its request rate (see Retry-After)",
        503: "the conversation store (Redis) did not answer, or the key file is unusable "
             "(see Retry-After)",
    }
    found: dict[int | str, dict[str, Any]] = {}
    for status in sorted({401, 403, 404, 422, 429, 503, *more}):
        entry: dict[str, Any] = {"model": ErrorResponse, "description": described[status]}
        if status in (429, 503):
            entry["headers"] = {"Retry-After": {"schema": {"type": "string"},
                                                "description": "seconds to wait before retrying"}}
        found[status] = entry
    return found
