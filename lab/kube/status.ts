/**
 * API errors as the real API server reports them: a `kind: Status` object with `reason`, `code`
 * and `message`, so clients (client-node, kubectl) show the same text they would show against
 * a real cluster.
 *
 * @module
 */

/** One field error in a Status' `details.causes`. */
export interface StatusCause {
  /** Machine reason, e.g. `FieldValueInvalid`. */
  readonly reason: string;
  /** What is wrong. */
  readonly message: string;
  /** Field path, e.g. `spec.blocks`. */
  readonly field?: string;
}

/** Details of a Status: which object, which fields. */
export interface StatusDetails {
  readonly name?: string;
  readonly group?: string;
  readonly kind?: string;
  readonly uid?: string;
  readonly causes?: readonly StatusCause[];
  readonly retryAfterSeconds?: number;
}

/** An error the server answers with a `kind: Status` body. */
export class ApiError extends Error {
  /** HTTP status code, also the Status' `code`. */
  readonly code: number;
  /** Machine reason, e.g. `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `Gone`. */
  readonly reason: string;
  /** Details: name, group, kind, causes. */
  readonly details?: StatusDetails;

  constructor(
    code: number,
    reason: string,
    message: string,
    options?: { details?: StatusDetails; cause?: unknown },
  ) {
    super(message, { cause: options?.cause });
    this.name = "ApiError";
    this.code = code;
    this.reason = reason;
    this.details = options?.details;
  }

  /** The `kind: Status` object for this error. */
  toStatus(): Record<string, unknown> {
    return statusObject(this.code, this.reason, this.message, this.details);
  }
}

/** A `kind: Status` object (failure unless `code` is 2xx). */
export function statusObject(
  code: number,
  reason: string,
  message: string,
  details?: StatusDetails,
): Record<string, unknown> {
  const ok = code >= 200 && code < 300;
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: ok ? "Success" : "Failure",
    ...(message ? { message } : {}),
    ...(reason ? { reason } : {}),
    ...(details ? { details } : {}),
    code,
  };
}

/** Who an error is about: the resource's plural (`pods`), group and the object's name. */
export interface Subject {
  readonly plural: string;
  readonly group: string;
  readonly name?: string;
}

function qualified(s: Subject): string {
  return s.group ? `${s.plural}.${s.group}` : s.plural;
}

/** 404 `NotFound`: `pods "web" not found`. */
export function notFound(s: Subject): ApiError {
  return new ApiError(404, "NotFound", `${qualified(s)} "${s.name ?? ""}" not found`, {
    details: { name: s.name, group: s.group, kind: s.plural },
  });
}

/** 409 `AlreadyExists`. */
export function alreadyExists(s: Subject): ApiError {
  return new ApiError(409, "AlreadyExists", `${qualified(s)} "${s.name ?? ""}" already exists`, {
    details: { name: s.name, group: s.group, kind: s.plural },
  });
}

/** 409 `Conflict` for a stale resourceVersion, worded like the real server. */
export function conflict(s: Subject, why: string): ApiError {
  return new ApiError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualified(s)} "${s.name ?? ""}": ${why}`,
    { details: { name: s.name, group: s.group, kind: s.plural } },
  );
}

/** 409 when a delete's preconditions (uid, resourceVersion) do not hold for `meta`. */
export function checkPreconditions(
  s: Subject,
  pre: Record<string, unknown>,
  meta: Record<string, unknown>,
): void {
  for (const [field, name] of [["resourceVersion", "ResourceVersion"], ["uid", "UID"]]) {
    if (pre[field!] !== undefined && pre[field!] !== meta[field!]) {
      throw conflict(
        s,
        `Precondition failed: ${name} in precondition: ${pre[field!]}, ${name} in object meta: ${
          meta[field!]
        }`,
      );
    }
  }
}

/** 422 `Invalid`: `Kind.group "name" is invalid: field: message, ...`. */
export function invalid(kind: string, s: Subject, causes: readonly StatusCause[]): ApiError {
  const what = s.group ? `${kind}.${s.group}` : kind;
  const list = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const text = list.length === 1 ? list[0] : `[${list.join(", ")}]`;
  return new ApiError(422, "Invalid", `${what} "${s.name ?? ""}" is invalid: ${text}`, {
    details: { name: s.name, group: s.group, kind, causes },
  });
}

/** 400 `BadRequest`. */
export function badRequest(message: string): ApiError {
  return new ApiError(400, "BadRequest", message);
}

/** 405 `MethodNotAllowed`, for verbs and subresources this server refuses. */
export function notAllowed(message: string): ApiError {
  return new ApiError(405, "MethodNotAllowed", message);
}

/** 410 `Expired`: the resourceVersion is older than the server's event history. */
export function expired(message: string): ApiError {
  return new ApiError(410, "Expired", message);
}

/** 415 `UnsupportedMediaType`, listing the media types that are accepted. */
export function unsupportedMediaType(type: string, accepted: readonly string[]): ApiError {
  return new ApiError(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ` +
      `${accepted.join(", ")} (got "${type}")`,
  );
}
