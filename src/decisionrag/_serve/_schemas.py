"""Request and response bodies (pydantic): what /openapi.json documents.

Bounds that an operator sets (`ServeLimits`) are checked by the service and written into
the OpenAPI document by `apply_limits`, so the document always states this server's limits.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._query import VISIBLE
from ._settings import ServeLimits

STRICT = ConfigDict(extra="forbid")


class Message(BaseModel):
    """One conversation turn; `assistant` is read as the agent."""

    model_config = STRICT
    role: Literal["user", "assistant", "agent"]
    content: str = Field(pattern=VISIBLE)


class RetrieveRequest(BaseModel):
    """`query` (the question), or `messages` (the conversation: its last user turn is the
    query, the turns before it the history), or both (`messages` then are the history)."""

    model_config = STRICT
    tree: str | None = Field(None, description="tree name (default: the server's first tree)")
    query: str | None = Field(None, pattern=VISIBLE, description="the question or the user's last turn")
    messages: list[Message] | None = Field(None, min_length=1, description="conversation turns, oldest first")
    context: str | None = Field(None, description="the user's situation (background), optional")
    k: int = Field(10, ge=1, description="how many passages to return")
    preset: str | None = Field(None, description="navigation preset (default: the server's)")
    filters: dict[str, Any] | None = Field(None, description="metadata filters (where supported)")
    trace: bool = Field(False, description="include the walk, stage by stage")
    walk: bool = Field(False, description="include the walk as the walk page draws it: every "
                       "candidate of every stage with its label, P(yes), status and branch")
    conversation_id: str | None = Field(
        None, min_length=1, max_length=128,
        description="keep the conversation's history and notepad on the server under this id")
    timeout: float | None = Field(None, gt=0, description="seconds this request may take")


class LocationOut(BaseModel):
    """Another passage of the same text, collapsed into the hit."""

    id: str
    doc_id: str
    path: list[str]


class HitOut(BaseModel):
    id: str
    doc_id: str
    score: float
    binary: float
    choice: float | None
    path: list[str]
    text: str
    metadata: dict[str, Any]
    also_at: list[LocationOut] = Field(
        default_factory=list, description="other passages of the same text, collapsed into this one")


class UsageOut(BaseModel):
    requests: int
    input_tokens: int
    output_tokens: int
    seconds: float
    cost_usd: float | None
    cached: int


class _StageCost(BaseModel):
    name: str
    level: int
    n_candidates: int
    requests: int
    input_tokens: int
    seconds: float
    local_seconds: float


class StageOut(_StageCost):
    kept: list[tuple[str, float]]
    pruned: int
    opened: list[str]


class WalkStageOut(_StageCost):
    """One stage as the walk page draws it: its counts and every candidate, best first."""

    kept: int
    opened: int
    reopened: int
    pruned: int
    reopened_not_kept: int
    rows: list[tuple[str, str, float | None, Literal["opened", "kept", "reopened", "pruned"], str]] = Field(
        description="[id, label, P(yes) or null, status, the branch it was reached under]")


class RetrieveResponse(BaseModel):
    results: list[HitOut]
    usage: UsageOut
    trace: list[StageOut] | None = None
    walk: list[WalkStageOut] | None = None
    tree: str
    preset: str
    conversation_id: str | None = None
    seconds: float
    request_id: str


class RerankText(BaseModel):
    """A document to rerank given by its `text` (Cohere's shape)."""

    model_config = STRICT
    text: str


class RerankPassage(BaseModel):
    """A document to rerank given, with the request's `tree`, as the `id` of one of that
    tree's passages."""

    model_config = STRICT
    id: str


class RerankRequest(BaseModel):
    """Cohere's (`documents`, `top_n`) or Hugging Face TEI's (`texts`) request shape; `tree`
    (optional) names a served tree whose word statistics the judge uses and whose passages
    documents may name by `id`."""

    model_config = ConfigDict(extra="ignore")  # other clients' optional knobs (truncate, model …)
    query: str = Field(pattern=VISIBLE)
    tree: str | None = None
    documents: list[str | RerankText | RerankPassage] | None = None
    texts: list[str] | None = None
    top_n: int | None = Field(None, ge=1)
    return_documents: bool = False
    return_text: bool = False
    timeout: float | None = Field(None, gt=0)


class RerankedDocument(BaseModel):
    text: str


class RerankResult(BaseModel):
    index: int
    relevance_score: float
    document: RerankedDocument | None = None


class RerankResponse(BaseModel):
    id: str
    results: list[RerankResult]
    usage: UsageOut
    meta: dict[str, Any]


class TeiRerankResult(BaseModel):
    index: int
    score: float
    text: str | None = None


class TreeSummary(BaseModel):
    name: str
    documents: int
    passages: int
    generation: int
    default: bool


class TreesResponse(BaseModel):
    trees: list[TreeSummary]


class TreeStats(BaseModel):
    name: str
    file: str
    file_bytes: int
    schema_version: int | str | None
    written_at: str | None
    counts: dict[str, int]
    by_depth: dict[str, dict[str, int]]
    passages_per_document: dict[str, float]
    opened_at: float
    generation: int


class MetadataKey(BaseModel):
    key: str
    documents: int = Field(description="documents that have the key (on themselves or a passage)")
    values: list[Any] | None = Field(
        description="its distinct values, sorted (list values count each element); null: more "
        "than `max_values`")
    numbers: tuple[float, float] | None = Field(description="the range of its numeric values")
    texts: tuple[str, str] | None = Field(description="the range of its string values")


class TreeMetadata(BaseModel):
    tree: str
    documents: int
    summarised: bool = Field(description="false: the tree file predates metadata summaries "
                             "(rebuild or sync it to list its keys)")
    max_values: int
    keys: list[MetadataKey]


class NodeRef(BaseModel):
    id: str
    kind: str
    title: str
    n_passages: int


class NodeOut(BaseModel):
    id: str
    kind: str
    title: str
    description: str
    heading: list[str]
    text: str
    doc_id: str | None
    n_passages: int
    metadata: dict[str, Any]


class NodeResponse(BaseModel):
    tree: str
    node: NodeOut
    path: list[NodeRef]
    children: list[NodeRef]
    children_total: int
    offset: int


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail
    request_id: str


class Health(BaseModel):
    status: Literal["ok"]
    version: str


class Ready(BaseModel):
    status: Literal["ready", "not_ready", "draining"]
    trees: list[str]
    judge: str


_SCALAR: dict[str, Any] = {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}
_CONDITION: dict[str, Any] = {
    "type": "object", "minProperties": 1, "additionalProperties": False,
    "properties": {"eq": _SCALAR, "ne": _SCALAR, "exists": {"type": "boolean"},
                   "in": {"type": "array", "minItems": 1, "maxItems": 50, "items": _SCALAR},
                   **{op: {"type": "number"} for op in ("gt", "gte", "lt", "lte")}},
}
FILTER_SCHEMA: dict[str, Any] = {
    "type": "object", "maxProperties": 10,
    "description": 'metadata filters, e.g. {"lang": "en", "year": {"gte": 2023}, '
                   '"tier": {"in": ["gold", "silver"]}}; "and"/"or" (lists of filters) and '
                   '"not" (one filter) combine them',
    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_.-]{0,63}$", "not": {"enum": ["and", "or", "not"]}},
    "additionalProperties": {"anyOf": [_SCALAR, _CONDITION]},
}


def apply_limits(
    document: dict[str, Any], limits: ServeLimits, presets: tuple[str, ...], *, filters: bool
) -> dict[str, Any]:
    """Write this server's limits into the OpenAPI document's request schemas."""
    schemas = document.get("components", {}).get("schemas", {})

    def prop(model: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = schemas.get(model, {}).get("properties", {}).get(name, {})
        return found

    def bounded_string(schema: dict[str, Any], max_length: int) -> None:
        for option in schema.get("anyOf", [schema]):
            if option.get("type") == "string":
                option["maxLength"] = max_length

    # one of query / messages (with a user turn); one of documents / texts
    def given(name: str, kind: str) -> dict[str, Any]:
        return {"required": [name], "properties": {name: {"type": kind}}}

    schemas.setdefault("RerankRequest", {})["oneOf"] = [
        {**given("documents", "array"), "not": given("texts", "array")},
        {**given("texts", "array"), "not": given("documents", "array")}]
    # /v1/answer's body is /v1/retrieve's plus how to answer: the same rules
    for model in ("RetrieveRequest", *(["AnswerRequest"] if "AnswerRequest" in schemas else [])):
        schemas.setdefault(model, {})["anyOf"] = [
            given("query", "string"), given("messages", "array")]
        if not filters:
            prop(model, "filters").update(
                {"anyOf": [{"type": "null"}], "description": "metadata filters: not in this build yet"})
        else:
            prop(model, "filters").update({"anyOf": [FILTER_SCHEMA, {"type": "null"}]})
        for option in prop(model, "messages").get("anyOf", []):
            if option.get("type") == "array":
                option["contains"] = {"type": "object", "properties": {"role": {"const": "user"}},
                                      "required": ["role"]}
        prop(model, "k")["maximum"] = limits.max_k
        bounded_string(prop(model, "query"), limits.max_query_chars)
        bounded_string(prop(model, "context"), limits.max_query_chars)
        for option in prop(model, "messages").get("anyOf", []):
            if option.get("type") == "array":
                option["maxItems"] = limits.max_messages
    bounded_string(prop("Message", "content"), limits.max_conversation_chars)
    for model in ("RetrieveRequest", "AnswerRequest"):
        for option in prop(model, "preset").get("anyOf", []):
            if option.get("type") == "string":
                option["enum"] = list(presets)
    for model in ("RetrieveRequest", "RerankRequest", "AnswerRequest"):
        for option in prop(model, "timeout").get("anyOf", []):
            if option.get("type") == "number":
                option.pop("exclusiveMinimum", None)
                option["minimum"] = limits.min_timeout
                option["maximum"] = limits.max_timeout
    rerank_query = prop("RerankRequest", "query")
    rerank_query["maxLength"] = limits.max_query_chars
    for field in ("documents", "texts"):
        for option in prop("RerankRequest", field).get("anyOf", []):
            if option.get("type") == "array":
                option["maxItems"] = limits.max_documents
                option["minItems"] = 1
                for item in option.get("items", {}).get("anyOf", [option.get("items", {})]):
                    if item.get("type") == "string":
                        item["maxLength"] = limits.max_document_chars
    bounded_string(prop("RerankText", "text"), limits.max_document_chars)
    return document


class ConversationTurnOut(BaseModel):
    role: Literal["user", "assistant"]
    content: str


class ConversationOut(BaseModel):
    """A conversation kept under `conversation_id` for the calling key on `tree`."""

    conversation_id: str
    tree: str
    messages: list[ConversationTurnOut] = Field(description="the stored turns, oldest first "
                                                "(the shape of a retrieve request's messages)")
    notepad: list[str] = Field(description="documents the walk looks at first, most recent first")
    expires_in: float = Field(description="seconds until it is forgotten unless another turn comes")


class ConversationDeleted(BaseModel):
    conversation_id: str
    tree: str
    deleted: bool = Field(description="whether there was a conversation to forget")
