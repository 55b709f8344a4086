import { pino, type Logger } from 'pino';

/** Paths whose values never reach a log line. */
export const REDACTED_PATHS = [
  'password',
  'token',
  'authorization',
  '*.password',
  '*.token',
  '*.authorization',
  'redisUrl',
  '*.redisUrl',
  'connection.password',
  'config.board.password',
  'config.board.token',
];

/** The process logger: JSON lines on stdout, with secrets redacted. */
export function createLogger(options: { level?: string; name?: string } = {}): Logger {
  return pino({
    name: options.name ?? 'leasebeat',
    level: options.level ?? process.env.LOG_LEVEL ?? 'info',
    redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
  });
}

/** A logger that drops everything: the default for library users who pass none. */
export const silentLogger: Logger = pino({ enabled: false });
