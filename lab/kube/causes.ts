/**
 * Field errors as the real API server words them (`field.ErrorList`): `Required value`,
 * `Invalid value: "x": why`, `Unsupported value`, `Forbidden`, `Too many`, `Duplicate value`,
 * `field is immutable`; shared by the hand-written validation of built-in kinds
 * (`builtin_validation.ts`, `service_validation.ts`).
 *
 * @module
 */
import { isIpv6 } from "../../lib/ipv6.ts";
import { isObj, type Obj } from "./resources.ts";
import type { StatusCause } from "./status.ts";
import { goValue, invalidCause } from "./meta_validation.ts";

export const IPV4 = /^((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
export const isIp6 = (v: unknown) => typeof v === "string" && v.includes(":") && isIpv6(v);
export const isIp = (v: unknown) => IPV4.test(String(v)) || isIp6(v);
const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;

/** Field errors of one object, worded as the real server words them. */
export class Causes {
  readonly list: StatusCause[] = [];
  required(field: string): void {
    this.list.push({ reason: "FieldValueRequired", field, message: "Required value" });
  }
  invalid(field: string, value: unknown, why: string): void {
    this.list.push(invalidCause(field, value, why));
  }
  forbidden(field: string, why: string): void {
    this.list.push({ reason: "FieldValueForbidden", field, message: `Forbidden: ${why}` });
  }
  tooMany(field: string, count: number, max: number): void {
    this.list.push({
      reason: "FieldValueTooMany",
      field,
      message: `Too many: ${count}: must have at most ${max} items`,
    });
  }
  duplicate(field: string, value: unknown): void {
    this.list.push({
      reason: "FieldValueDuplicate",
      field,
      message: `Duplicate value: ${goValue(value)}`,
    });
  }
  /** `ValidateImmutableField`. */
  immutable(field: string, value: unknown, old: unknown): void {
    if (JSON.stringify(value) !== JSON.stringify(old)) {
      this.invalid(field, value, "field is immutable");
    }
  }
  oneOf(field: string, value: unknown, allowed: readonly string[]): void {
    if (value === undefined || allowed.includes(String(value))) return;
    const supported = allowed.map((a) => JSON.stringify(a)).join(", ");
    this.list.push({
      reason: "FieldValueNotSupported",
      field,
      message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${supported}`,
    });
  }
  port(field: string, value: unknown, required: boolean): void {
    if (value === undefined) {
      if (required) this.required(field);
    } else if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > 65535) {
      this.invalid(field, value, "must be between 1 and 65535, inclusive");
    }
  }
}

/** The objects of a list field (none when it is not a list). */
export function list(v: unknown): Obj[] {
  return Array.isArray(v) ? v.filter(isObj) : [];
}

/** `metav1.Condition`s: type, status True/False/Unknown, reason format, lastTransitionTime. */
export function conditions(c: Causes, path: string, value: unknown): void {
  list(value).forEach((cond, i) => {
    const at = `${path}[${i}]`;
    if (!cond.type) c.required(`${at}.type`);
    c.oneOf(`${at}.status`, cond.status, ["True", "False", "Unknown"]);
    if (cond.status === undefined) c.required(`${at}.status`);
    if (!cond.lastTransitionTime) c.required(`${at}.lastTransitionTime`);
    if (!cond.reason) c.required(`${at}.reason`);
    else if (!REASON.test(String(cond.reason))) {
      c.invalid(
        `${at}.reason`,
        cond.reason,
        `a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'`,
      );
    }
  });
}
