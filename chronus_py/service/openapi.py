"""The OpenAPI 3.1 description of the API, served at ``GET /openapi.json``."""

from __future__ import annotations

from chronus_py.service.jobspec import MAX_DEADLINES

_ERROR = {
    "type": "object",
    "required": ["error", "field"],
    "properties": {"error": {"type": "string"}, "field": {"type": ["string", "null"]}},
}
_DEADLINE = {
    "type": "object",
    "required": ["at"],
    "additionalProperties": False,
    "properties": {
        "at": {"type": "number", "description": "absolute backend seconds"},
        "value": {"type": "number", "minimum": 0, "default": 1},
    },
}
_JOB_IN = {
    "type": "object",
    "anyOf": [
        {"required": ["gpus", "estimate_seconds"]},
        {"required": ["gpus", "iterations"]},
        {"required": ["elastic", "model"]},
    ],
    "additionalProperties": False,
    "properties": {
        "id": {"type": ["string", "integer"], "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
        "gpus": {"type": "integer", "minimum": 1},
        "estimate_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "the work to plan with; leave out if unknown (give iterations): the "
            "job is then measured in place from its progress reports",
        },
        "deadlines": {
            "type": "array",
            "items": _DEADLINE,
            "maxItems": MAX_DEADLINES,
            "description": "tightest first; none: best-effort",
        },
        "duration_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "sim backend: the true work (default: estimate)",
        },
        "iterations": {
            "type": "integer",
            "minimum": 1,
            "description": "total iterations: progress reports re-estimate the job from them",
        },
        "model": {"type": "string"},
        "tenant": {"type": "string", "description": "admin tokens only"},
        "elastic": {
            "type": "object",
            "additionalProperties": False,
            "required": ["batch", "iterations"],
            "description": "an elastic job (model required, no gpus): admission gives it its "
            "smallest size that still meets its deadline, by the --throughputs curve",
            "properties": {
                "min_gpus": {"type": "integer", "minimum": 1, "default": 1},
                "max_gpus": {"type": "integer", "minimum": 1, "default": 64},
                "batch": {"type": "integer", "minimum": 1},
                "iterations": {"type": "number", "exclusiveMinimum": 0},
            },
        },
    },
}
_ADMISSION = {
    "type": "object",
    "required": ["decision", "reason"],
    "properties": {
        "decision": {"enum": ["guaranteed", "not_guaranteed", "rejected", "tentative"]},
        "reason": {"type": "string"},
        "deadline": _DEADLINE,
    },
}
_ESTIMATE = {
    "type": "object",
    "description": "what is known of the job's runtime and what is promised on it "
    "(chronus_py/estimates/report.py); null once the job ended",
    "properties": {
        "phase": {"enum": ["unknown", "measuring", "estimated"]},
        "promise": {"enum": ["tentative", "firm", "none"]},
        "seconds": {"type": ["number", "null"]},
        "low": {"type": ["number", "null"]},
        "high": {"type": ["number", "null"]},
        "measured": {"type": "number"},
        "answer_by": {"type": ["number", "null"]},
        "guaranteed_deadline": {"type": ["number", "null"]},
    },
}
_JOB = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "tenant": {"type": "string"},
        "state": {"enum": ["pending", "running", "finished", "cancelled", "failed"]},
        "gpus": {"type": "integer", "description": "its size (an elastic job's: as admitted)"},
        "elastic": {"type": ["object", "null"]},
        "submit": {"type": "number"},
        "deadlines": {"type": "array", "items": _DEADLINE},
        "estimate_seconds": {"type": "number"},
        "admission": _ADMISSION,
        "guaranteed": {"oneOf": [_DEADLINE, {"type": "null"}]},
        "placement": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "integer"}},
        },
        "estimate": {"oneOf": [_ESTIMATE, {"type": "null"}]},
        "first_start": {"type": ["number", "null"]},
        "finished_at": {"type": ["number", "null"]},
        "starts": {"type": "integer"},
        "met_first_deadline": {"type": "boolean"},
    },
}


def _json(schema: dict, description: str = "OK") -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_ERRORS = {
    code: _json(_ERROR, why)
    for code, why in (
        ("400", "body is not JSON"),
        ("401", "missing or unknown token"),
        ("404", "no such job (or another tenant's)"),
        ("409", "conflict"),
        ("413", "body too large"),
        ("422", "a field is wrong: `field` names it"),
        ("503", "backend unavailable"),
    )
}
_ID = [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}]

OPENAPI = {
    "openapi": "3.1.0",
    "info": {
        "title": "chronus serve",
        "version": "1",
        "description": "Deadline-aware GPU job scheduling. Times are absolute seconds on "
        "the backend's clock (GET /v1/cluster gives `now`).",
    },
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/v1/jobs": {
            "post": {
                "summary": "Submit a job; the answer carries its admission",
                "parameters": [{"name": "dry_run", "in": "query", "schema": {"type": "boolean"}}],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _JOB_IN}},
                },
                "responses": {
                    "201": _json(
                        {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "submitted": {"type": "boolean"},
                                "admission": _ADMISSION,
                            },
                        },
                        "accepted",
                    ),
                    "200": _json({"type": "object"}, "rejected, or a dry run"),
                    **_ERRORS,
                },
            },
            "get": {
                "summary": "List jobs (a tenant sees its own)",
                "parameters": [
                    {"name": n, "in": "query", "schema": {"type": t}}
                    for n, t in (
                        ("tenant", "string"),
                        ("state", "string"),
                        ("limit", "integer"),
                        ("after", "string"),
                    )
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "jobs": {"type": "array", "items": _JOB},
                                "next_after": {"type": ["string", "null"]},
                            },
                        }
                    ),
                    **_ERRORS,
                },
            },
        },
        "/v1/jobs/{job_id}": {
            "get": {
                "summary": "One job",
                "parameters": _ID,
                "responses": {"200": _json(_JOB), **_ERRORS},
            },
            "delete": {
                "summary": "Cancel a job",
                "parameters": _ID,
                "responses": {"200": _json(_JOB), **_ERRORS},
            },
        },
        "/v1/jobs/{job_id}/progress": {
            "post": {
                "summary": "Report iterations done; re-estimates the job",
                "parameters": _ID,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["iterations_done"],
                                "properties": {"iterations_done": {"type": "integer"}},
                            }
                        }
                    },
                },
                "responses": {"200": _json(_JOB), **_ERRORS},
            }
        },
        "/v1/plan": {
            "get": {
                "summary": "The last round's decisions and lease plan",
                "responses": {"200": _json({"type": "object"}), **_ERRORS},
            }
        },
        "/v1/cluster": {
            "get": {
                "summary": "Nodes, free GPUs and the backend's clock",
                "responses": {"200": _json({"type": "object"}), **_ERRORS},
            }
        },
        "/v1/hosts/{node}/layers": {
            "get": {
                "summary": "The node's current scx_layered config",
                "parameters": [
                    {"name": "node", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": _json({"type": "object"}), **_ERRORS},
            }
        },
        "/healthz": {
            "get": {
                "summary": "Liveness: answered without waiting for the round in progress",
                "security": [],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "status": {"type": "string"},
                                "backend": {"type": "string"},
                                "now": {"type": "number"},
                                "rounds": {"type": "integer"},
                                "round_seconds_p50": {"type": ["number", "null"]},
                                "round_seconds_p99": {"type": ["number", "null"]},
                                "round_running_seconds": {
                                    "type": ["number", "null"],
                                    "description": "how long the round in progress has run; "
                                    "null between rounds",
                                },
                            },
                        }
                    )
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "security": [],
                "responses": {"200": {"description": "text format"}},
            }
        },
    },
}
