/** Protocol name and version of the runner contract, sent in the runner's hello line. Kept alone so runner programs import nothing heavy. */
export const RUNNER_PROTOCOL = "suanli-attest-runner/2";
