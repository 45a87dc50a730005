/**
 * The LB's data sources: what writes services, frontends and backends into the tables through
 * the Writer (`node/lb/tables/`), each as its own source. The agent runs the file source
 * (`--config`) or the Redis model source (`--model redis`); the controller runs the Kubernetes
 * source, fed by its informers (`controller/k8s/_feed.ts`).
 *
 * - `file_source.ts` services from YAML or JSON (source `file`; the embedded demo config);
 * - `k8s_convert.ts` Service and EndpointSlice objects → model inputs (pure), `k8s_source.ts`
 *   their write side (source `k8s`);
 * - `redis_source.ts` the model the controller publishes in Redis (source `redis`);
 * - `health_check.ts` a service's health check as the file and annotations describe it.
 *
 * @module
 */
export {
  ConfigError,
  configFromValue,
  DEFAULT_CONFIG_YAML,
  type FileConfig,
  FileSource,
  parseConfig,
} from "./file_source.ts";
export {
  HEALTH_CHECK_ANNOTATION,
  HEALTH_CHECK_DEFAULTS,
  type HealthCheck,
  HealthCheckError,
  healthCheckFromAnnotations,
  parseHealthCheck,
  sameHealthCheck,
} from "./health_check.ts";
export {
  ConversionError,
  convertEndpointSlice,
  convertService,
  flat,
  FLOW_KEY_ANNOTATION,
  type K8sEndpointSlice,
  type K8sMeta,
  type K8sService,
  MAGLEV_SIZE_ANNOTATION,
  objectName,
  SERVICE_NAME_LABEL,
  sliceServiceName,
} from "./k8s_convert.ts";
export { type K8sEvent, K8sSource } from "./k8s_source.ts";
export { RedisModelSource, type RedisModelSourceOptions } from "./redis_source.ts";
