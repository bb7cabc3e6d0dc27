import type { Logger } from 'pino';
import type { AdminService } from '../admin/service.js';
import { isBerthError } from '../base/errors.js';
import type { Dispatch } from '../runs/scheduler.js';
import type { ScheduleStore } from '../store/schedules.js';
import { scheduledMessageId } from './scheduled.js';
import type { RunningBridges } from './start.js';

/**
 * Where a due schedule goes (runs/scheduler.ts hands each firing here): a schedule with a chat is
 * posted into that chat's bridge (its inbox deduplicates by the firing's id, so a firing handed
 * again after a crash is a duplicate) and answered there; one without is a run of its own,
 * marked started before it begins (a restart never starts it again), its outcome kept on the
 * schedule and its record in the run log. Either way it is an ordinary run of the tenant's session.
 */
export function scheduleDispatch(deps: {
  bridges: () => Pick<RunningBridges, 'channel' | 'web'> | undefined;
  admin: Pick<AdminService, 'runMessage'>;
  store: Pick<ScheduleStore, 'markStarted' | 'settle'>;
  logger: Logger;
}): Dispatch {
  return async (firing, schedule) => {
    if (schedule.chat) {
      const running = deps.bridges();
      const bridge = running?.channel(schedule.chat.channel) ?? (schedule.chat.channel === 'web' ? running?.web : undefined);
      if (!bridge) return 'wait';
      const posted = bridge.core.post({
        id: scheduledMessageId(firing.key),
        chat: schedule.chat.chat,
        sender: schedule.chat.sender,
        tenant: schedule.tenant,
        text: schedule.task,
        ...(schedule.session ? { session: schedule.session } : {}),
      });
      deps.store.settle(
        firing.key,
        posted === 'refused' ? 'refused: its sender may no longer write to this bot' : `posted to the ${schedule.chat.channel} chat`,
      );
      return 'handed';
    }
    deps.store.markStarted(firing.key);
    try {
      const run = await deps.admin.runMessage(schedule.project, {
        user: schedule.tenant,
        message: schedule.task,
        ...(schedule.session ? { session: schedule.session } : {}),
        schedule: schedule.id,
      });
      deps.store.settle(firing.key, `run ${run.run}: exit ${run.exit_code}`);
    } catch (err) {
      deps.logger.warn({ schedule: schedule.id, err: String(err).slice(0, 300) }, 'a scheduled run failed');
      deps.store.settle(firing.key, `failed: ${isBerthError(err) ? err.code : 'INTERNAL'}`);
    }
    return 'handed';
  };
}
