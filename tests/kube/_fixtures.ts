/**
 * Objects the kube tests share.
 *
 * @module
 */

/** The events.k8s.io/v1 Event Holdfast's controller writes when it allocates an address. */
export function allocationEvent<T>(eventTime: T, regarding: Record<string, string>) {
  return {
    eventTime,
    reason: "AddressAllocated",
    note: "allocated 10.0.100.1 from pool blue",
    type: "Normal",
    action: "Allocate",
    reportingController: "holdfast.io/controller",
    reportingInstance: "controller-0",
    regarding: { kind: "Service", namespace: "default", name: "web", ...regarding },
  };
}
