// Pieces the control plane's API schemas share: the plain error body most groups answer with, and the
// "no control characters" pattern of free-text fields.
import { z } from 'zod';

export const ErrorBody = z.object({ detail: z.unknown() });

export const noControl = /^[^\p{Cc}]*$/u;
