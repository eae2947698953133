/**
 * Waits `ms` on the global timer (which vi.useFakeTimers controls). Only where the wait is the
 * behaviour under test or paces a loop: a test that waits for something polls for it (vi.waitFor).
 */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
