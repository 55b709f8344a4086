/**
 * The second entry point, `leasebeat/cli-support`: what the `leasebeat` command needs beyond the library
 * (`leasebeat`, src/index.ts). The settings schema and the service configuration it reads from LEASEBEAT_*
 * variables and flags, the jobs loader and tick listing of `leasebeat validate`, durations as flags spell
 * them, the logger, and Redis connections per topology for its checks and the embedded redis-server.
 *
 * src/cli may import only src/index.ts and this module (an eslint rule, checked by test/cli/layering.test.ts),
 * so the command stays a client of the package. These are its internals, exported for it: an application
 * should not need them, and they may change in any release.
 */
export {
  SETTINGS,
  SETTING_NAMES,
  ConfigError,
  loadServiceConfig,
  inCluster,
  redactUrl,
  type SettingSpec,
  type SettingName,
  type SettingScope,
  type RawSettings,
  type ServiceConfig,
} from './settings.js';
export { loadJobs, type LoadError, type LoadResult } from '../scheduling/loader.js';
export { nextTicks } from '../scheduling/plan.js';
export { parseDuration, formatDuration } from '../scheduling/duration.js';
export { createLogger } from '../util/logger.js';
export { RedisConnections, type ConnectionRole } from '../redis/redis-topology.js';
