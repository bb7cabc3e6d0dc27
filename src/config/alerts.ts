import { z } from 'zod';

/** berth.yaml `alerts:`: where berth tells the operator about a leak as it happens (a decoy credential used), besides its log, metric, console and audit line. */
export const AlertsSchema = z
  .object({
    webhook: z
      .object({
        url: z
          .url({ protocol: /^https?$/ })
          .max(2048)
          .describe('Where each alert is POSTed as JSON (a chat webhook, an incident tool, a relay of your own).'),
        secret: z
          .string()
          .min(16, 'must be at least 16 characters')
          .max(256)
          .describe(
            'Signs each alert: header x-berth-signature is "sha256=" and the hex HMAC-SHA256 of "<x-berth-timestamp>.<body>" under this secret.',
          ),
      })
      .strict()
      .optional()
      .describe('An alert webhook; without it alerts go to the log, metric, console and audit log only.'),
  })
  .strict()
  .prefault({});
export type AlertsSettings = z.output<typeof AlertsSchema>;
