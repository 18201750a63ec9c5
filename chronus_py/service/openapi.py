"""The OpenAPI 3.1 description of the API, served at ``GET /openapi.json``: ``OPENAPI`` as any
server has it, and ``for_server`` with what one server enforces beyond it (its cluster's size,
its elastic models). Every enum and range here is one the server checks: schemathesis runs the
whole API against it (tests/service/test_schemathesis.py).
"""

from __future__ import annotations

import copy

from chronus_py.service.jobspec import CGROUP, MAX_DEADLINES, PATH_SEGMENTS, TENANT
from placement.limits import MAX_SECONDS

STATES = ("pending", "running", "finished", "cancelled", "failed")
MAX_LIMIT = 10_000

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
_NOT_ELASTIC = {"not": {"required": ["elastic"]}}
_JOB_IN = {
    "type": "object",
    "anyOf": [
        {"required": ["gpus", "estimate_seconds"], **_NOT_ELASTIC},
        {"required": ["gpus", "iterations"], **_NOT_ELASTIC},
        {
            "required": ["elastic", "model"],
            "not": {"anyOf": [{"required": ["gpus"]}, {"required": ["estimate_seconds"]}]},
        },
    ],
    "additionalProperties": False,
    "properties": {
        "id": {
            "type": "string",
            "pattern": "^[A-Za-z0-9._:-]{1,128}$",
            "not": {"enum": list(PATH_SEGMENTS)},
            "description": "yours alone: another tenant may use the same id; not . or .., "
            "which a URL's path drops",
        },
        "gpus": {"type": "integer", "minimum": 1},
        "estimate_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_SECONDS,
            "description": "the work to plan with; leave out if unknown (give iterations): the "
            "job is then measured in place from its progress reports",
        },
        "deadlines": {
            "type": "array",
            "items": _DEADLINE,
            "maxItems": MAX_DEADLINES,
            "description": "in any order (kept tightest first); none: best-effort",
        },
        "duration_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": MAX_SECONDS,
            "description": "sim backend: the true work (default: estimate)",
        },
        "iterations": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SECONDS,
            "description": "total iterations: progress reports re-estimate the job from them",
        },
        "model": {
            "type": "string",
            "minLength": 1,
            "maxLength": 128,
            "description": "informative; for an elastic job, one of the throughput tables' models",
        },
        "tenant": {
            "type": "string",
            "pattern": f"^{TENANT.pattern}$",
            "description": "your token's tenant; only an admin token names another (else 403)",
        },
        "cgroup": {"type": "string", "maxLength": 512, "pattern": f"^{CGROUP.pattern}$"},
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
                "iterations": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SECONDS},
            },
        },
    },
}
_ADMISSION = {
    "type": "object",
    "required": ["decision", "reason"],
    "properties": {
        "decision": {"enum": ["guaranteed", "not_guaranteed", "tentative"]},
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
    "required": ["id", "tenant", "state", "gpus", "submit", "estimate_seconds", "admission"],
    "properties": {
        "id": {"type": "string"},
        "tenant": {"type": "string"},
        "state": {"enum": ["pending", "running", "finished", "cancelled", "failed"]},
        "gpus": {"type": "integer", "description": "its size (an elastic job's: as admitted)"},
        "elastic": {"type": ["object", "null"]},
        "submit": {"type": "number"},
        "deadlines": {"type": "array", "items": _DEADLINE},
        "estimate_seconds": {
            "type": ["number", "null"],
            "description": "the work it is planned with; null while a job without an estimate "
            "is being measured",
        },
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
        ("400", "body is not JSON, or not HTTP"),
        ("401", "missing or unknown token"),
        ("403", "the token may not do this (a tenant token naming another tenant)"),
        ("404", "no such job (or another tenant's)"),
        ("405", "method not allowed: the Allow header lists those the path has"),
        ("408", "the request did not arrive in time"),
        ("409", "conflict: an id you used already, or a job no longer active"),
        ("413", "body too large"),
        ("415", "body is not application/json"),
        ("422", "a field is wrong, or the job can never run here: `field` names it"),
        ("503", "backend unavailable, too many connections, or an internal error"),
    )
}
_ID = [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}]
_SUBMITTED = {
    "type": "object",
    "required": ["id", "submitted", "now", "admission"],
    "properties": {
        "id": {"type": "string"},
        "submitted": {"const": True},
        "now": {"type": "number"},
        "admission": _ADMISSION,
    },
}
_NOT_SUBMITTED = {
    "type": "object",
    "required": ["submitted", "admission"],
    "additionalProperties": False,
    "description": "no job exists, so the answer has no id",
    "properties": {
        "submitted": {"const": False},
        "dry_run": {"const": True},
        "admission": {
            **_ADMISSION,
            "properties": {
                **_ADMISSION["properties"],
                "decision": {"enum": ["guaranteed", "not_guaranteed", "tentative", "rejected"]},
            },
        },
    },
}
_JOB_LINKS = {
    "GetJob": {"operationId": "getJob", "parameters": {"job_id": "$response.body#/id"}},
    "CancelJob": {"operationId": "cancelJob", "parameters": {"job_id": "$response.body#/id"}},
}

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
                "parameters": [
                    {
                        "name": "dry_run",
                        "in": "query",
                        "description": "answer what admission would say, submitting nothing",
                        "schema": {"type": "boolean"},
                    }
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _JOB_IN}},
                },
                "operationId": "submitJob",
                "responses": {
                    "201": {**_json(_SUBMITTED, "submitted"), "links": _JOB_LINKS},
                    "200": _json(
                        _NOT_SUBMITTED,
                        "not submitted: a dry run (what admission would answer), or a "
                        "well-formed job this service cannot run (decision rejected)",
                    ),
                    **_ERRORS,
                },
            },
            "get": {
                "summary": "List jobs (a tenant sees its own)",
                "operationId": "listJobs",
                "parameters": [
                    {
                        "name": "tenant",
                        "in": "query",
                        "schema": {"type": "string", "pattern": f"^{TENANT.pattern}$"},
                    },
                    {
                        "name": "state",
                        "in": "query",
                        "schema": {"enum": list(STATES)},
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIMIT,
                            "default": 1000,
                        },
                    },
                    {
                        "name": "after",
                        "in": "query",
                        "description": "the last id of the previous page (one of yours)",
                        "schema": {"type": "string"},
                    },
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
                "operationId": "getJob",
                "parameters": _ID,
                "responses": {"200": _json(_JOB), **_ERRORS},
            },
            "delete": {
                "summary": "Cancel a job",
                "operationId": "cancelJob",
                "parameters": _ID,
                "responses": {"200": _json(_JOB), **_ERRORS},
            },
        },
        "/v1/jobs/{job_id}/progress": {
            "post": {
                "summary": "Report iterations done; re-estimates the job",
                "operationId": "reportProgress",
                "parameters": _ID,
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "required": ["iterations_done"],
                                "additionalProperties": False,
                                "properties": {
                                    "iterations_done": {"type": "integer", "minimum": 0}
                                },
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


def for_server(gpus: int, models: dict[str, list[int]]) -> dict:
    """``OPENAPI`` with what this server enforces on top: at most ``gpus`` GPUs per job, and an
    elastic job's model and batch one of ``models`` (model -> the global batch sizes of its
    throughput curves, which elastic jobs are sized by)."""
    out = copy.deepcopy(OPENAPI)
    job = out["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    job["properties"]["gpus"]["maximum"] = gpus
    elastic = job["properties"]["elastic"]["properties"]
    elastic["min_gpus"]["maximum"] = gpus
    job["anyOf"][2]["oneOf"] = [
        {
            "properties": {
                "model": {"const": model},
                "elastic": {"properties": {"batch": {"enum": batches}}},
            }
        }
        for model, batches in sorted(models.items())
    ]
    return out
