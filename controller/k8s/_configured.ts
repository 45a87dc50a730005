/**
 * The Service condition `holdfast.io/Configured`: False with reason `InvalidAnnotation` while a
 * Holdfast annotation cannot be read (the Service is left out of the LB model until it is fixed;
 * every other Service keeps working), True with reason `Valid` once it is fixed. A Service that
 * never had a bad annotation gets no such condition (no write for it).
 *
 * @module
 */

import { isIpv4 } from "../../lib/ipv4.ts";
import { isIpv6 } from "../../lib/ipv6.ts";
import { type IpamCondition, LOAD_BALANCER_IPS_ANNOTATION } from "../ipam/mod.ts";
import type { KubeObject } from "./objects.ts";

/** Condition type on Services whose Holdfast annotations were read (or not). */
export const CONFIGURED_CONDITION = "holdfast.io/Configured";
/** Reason (condition and Event) of an annotation that cannot be read. */
export const INVALID_ANNOTATION = "InvalidAnnotation";

/** Why `svc`'s annotations cannot be used, given the conversion's error (undefined: fine). */
export function annotationProblem(svc: KubeObject, conversionError?: string): string | undefined {
  // The conversion names the annotation and its value after "Cannot convert service "ns/x": ".
  if (conversionError !== undefined) return conversionError.replace(/^Cannot convert [^:]*: /, "");
  const ips: string | undefined = svc.metadata?.annotations?.[LOAD_BALANCER_IPS_ANNOTATION];
  if (ips === undefined) return undefined;
  const bad = ips.split(",").map((s) => s.trim()).find((s) =>
    s !== "" && !isIpv4(s) && !(s.includes(":") && isIpv6(s))
  );
  return bad === undefined
    ? undefined
    : `annotation ${LOAD_BALANCER_IPS_ANNOTATION}="${ips}": "${bad}" is not an IPv4 or IPv6 address`;
}

/**
 * The `holdfast.io/Configured` condition `svc` should show: False while `problem` is set, True
 * once fixed if it showed the condition before, else none.
 */
export function configuredCondition(
  svc: KubeObject,
  problem: string | undefined,
): IpamCondition | undefined {
  const gen: number | undefined = svc.metadata?.generation;
  const had = (svc.status?.conditions ?? []).some((c: IpamCondition) =>
    c.type === CONFIGURED_CONDITION
  );
  if (problem === undefined && !had) return undefined;
  return {
    type: CONFIGURED_CONDITION,
    ...(problem === undefined
      ? { status: "True", reason: "Valid", message: "Holdfast annotations are valid" }
      : {
        status: "False",
        reason: INVALID_ANNOTATION,
        message: `${problem}; the Service is left out of the load balancer until it is fixed`,
      }),
    ...(gen !== undefined ? { observedGeneration: gen } : {}),
  };
}
