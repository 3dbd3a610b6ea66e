"""What the answer models share: they refuse keys they do not name, so a key the code adds
without the model is a failing test rather than an undocumented field."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, WithJsonSchema

# Rendered by the services with isoformat(): RFC 3339 with an offset. Kept a string so that the
# answer is byte for byte what the service rendered.
Timestamp = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")
