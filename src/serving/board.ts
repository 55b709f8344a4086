import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { Express, RequestHandler } from 'express';

/** Where Bull Board is mounted; its job pages live at `${BOARD_PATH}/queue/<queue>/<jobId>`. */
export const BOARD_PATH = '/admin/queues';

/** Bull Board over a set of queues that may change while the process runs (hot-reloaded jobs). */
export interface Board {
  router: Express;
  /** Middleware that hands the board the current queues before it answers. */
  sync: RequestHandler;
}

/** Creates Bull Board at `BOARD_PATH` for the queues `queues()` returns at each request. */
export function createBoard(options: { queues: () => Queue[]; readOnly: boolean; title: string }): Board {
  const adapt = (queue: Queue): BullMQAdapter => new BullMQAdapter(queue, { readOnlyMode: options.readOnly });
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  let shown = options.queues();
  const { replaceQueues } = createBullBoard({
    queues: shown.map(adapt),
    serverAdapter,
    options: {
      uiConfig: {
        boardTitle: options.title,
        miscLinks: [{ text: 'leasebeat status', url: '/' }],
        // The worker list runs CLIENT LIST on every poll, which managed Redis often forbids.
        showWorkers: false,
      },
    },
  });

  const sync: RequestHandler = (_req, _res, next) => {
    const current = options.queues();
    const changed = current.length !== shown.length || current.some((queue, index) => queue !== shown[index]);
    if (changed) {
      replaceQueues(current.map(adapt));
      shown = current;
    }
    next();
  };
  const router = serverAdapter.getRouter() as Express;
  router.disable('x-powered-by');
  return { router, sync };
}
