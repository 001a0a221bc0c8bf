/**
 * The service definitions `tether-host service install` writes, as documents (pure functions, checked by the
 * tests: `systemd-analyze verify`, a plist parser, an XML parser):
 *
 * - Linux: a systemd user unit. It restarts the host whenever it ends, except on exit codes where a restart
 *   cannot help (2 a bad setting, 3 pair again, 4 another tether-host took over); 10, "updated itself", is a
 *   success, and the restart starts the new executable. Backoff: 2 s, growing to 5 min on systemd 254+.
 * - macOS: a launchd agent, kept alive while it exits unsuccessfully (10 s apart); the host itself exits 0
 *   where restarting cannot help (launchd cannot exclude exit codes).
 * - Windows: a scheduled task at logon, running `tether-host service run`, which supervises the host (restart
 *   with backoff, the log file); the task itself restarts on failure every minute.
 */

export const SERVICE_NAME = "tether-host";
export const SYSTEMD_UNIT = `${SERVICE_NAME}.service`;
export const LAUNCHD_LABEL = "com.tether.tether-host";

/** How the service starts the host. */
export interface ServiceSpec {
  /** The program and its arguments (`/home/me/.local/bin/tether-host run`). */
  command: readonly string[];
  /** Set in the service's environment: where the config is, and the overrides in force at install time. */
  env: Record<string, string>;
  workingDirectory: string;
}

const HEADER = "Written by `tether-host service install` (run it again after changing the config); `tether-host service uninstall` removes it.";

function noControl(value: string, what: string): string {
  // A newline would end the setting early; no path or variable value needs one.
  if (/[\0\r\n]/.test(value)) throw new Error(`${what} holds a line break or NUL, which a service definition cannot carry`);
  return value;
}

/** systemd's quoting: a double-quoted word, with `\` and `"` escaped and `%` doubled (specifiers expand everywhere). */
function systemdWord(value: string, what: string, dollar: boolean): string {
  let escaped = noControl(value, what).replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%");
  // ExecStart='s arguments expand $VARIABLES; its path and Environment= do not.
  if (dollar) escaped = escaped.replace(/\$/g, "$$$$");
  return `"${escaped}"`;
}

export function systemdUnit(spec: ServiceSpec, options: { restartSteps: boolean }): string {
  const environment = Object.entries(spec.env).map(([name, value]) => `Environment=${systemdWord(`${name}=${value}`, name, false)}`);
  return [
    `# ${HEADER}`,
    "[Unit]",
    "Description=Tether device host (tether-host): runs local tools for a Tether server",
    // A user manager has no network-online.target to wait for; the host retries its connection itself.
    "StartLimitIntervalSec=0",
    "",
    "[Service]",
    "Type=exec",
    // $VARIABLES expand in the arguments, not in the executable's path.
    `ExecStart=${spec.command.map((word, index) => systemdWord(word, index === 0 ? "the executable's path" : "an argument", index > 0)).join(" ")}`,
    // A path to the end of the line, not a quoted word.
    `WorkingDirectory=${noControl(spec.workingDirectory, "the working directory").replace(/%/g, "%%")}`,
    ...environment,
    "Restart=always",
    "RestartSec=2s",
    ...(options.restartSteps ? ["RestartSteps=8", "RestartMaxDelaySec=5min"] : []),
    "# 2: a setting cannot be used; 3: pair again; 4: another tether-host took over. A restart would not help.",
    "RestartPreventExitStatus=2 3 4",
    "# 10: it updated itself; the restart runs the new executable.",
    "SuccessExitStatus=10",
    "TimeoutStopSec=20s",
    "UMask=0077",
    "NoNewPrivileges=yes",
    "",
    "[Install]",
    "WantedBy=default.target",
    "",
  ].join("\n");
}

const xml = (value: string, what: string) => noControl(value, what).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

export function launchdPlist(spec: ServiceSpec, logDir: string): string {
  const strings = (values: readonly string[], indent: string) => values.map((value) => `${indent}<string>${xml(value, "an argument")}</string>`).join("\n");
  const env = Object.entries(spec.env)
    .map(([name, value]) => `      <key>${xml(name, "a variable name")}</key>\n      <string>${xml(value, name)}</string>`)
    .join("\n");
  return `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- ${HEADER.replace(/--/g, "- -")} -->
<plist version="1.0">
  <dict>
    <key>Label</key>
    <string>${LAUNCHD_LABEL}</string>
    <key>ProgramArguments</key>
    <array>
${strings(spec.command, "      ")}
    </array>
    <key>EnvironmentVariables</key>
    <dict>
${env}
    </dict>
    <key>WorkingDirectory</key>
    <string>${xml(spec.workingDirectory, "the working directory")}</string>
    <key>RunAtLoad</key>
    <true/>
    <key>KeepAlive</key>
    <dict>
      <key>SuccessfulExit</key>
      <false/>
    </dict>
    <key>ThrottleInterval</key>
    <integer>10</integer>
    <key>ProcessType</key>
    <string>Background</string>
    <key>StandardErrorPath</key>
    <string>${xml(`${logDir}/tether-host.stderr.log`, "the log directory")}</string>
  </dict>
</plist>
`;
}

/**
 * Task Scheduler's XML (schema 1.2, what `schtasks /Create /XML` reads, as UTF-16: see `utf16le`). Tasks
 * carry no environment: `service run` reads it from `<configDir>/service.json`.
 */
export function windowsTask(spec: ServiceSpec, userId: string): string {
  const [program, ...args] = spec.command;
  const quoted = args.map((arg) => (/[\s"]/.test(arg) ? `"${arg.replace(/"/g, '\\"')}"` : arg)).join(" ");
  return `<?xml version="1.0" encoding="UTF-16"?>
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>Tether device host (tether-host): runs local tools for a Tether server. ${xml(HEADER, "the description")}</Description>
    <URI>\\${SERVICE_NAME}</URI>
  </RegistrationInfo>
  <Triggers>
    <LogonTrigger>
      <Enabled>true</Enabled>
      <UserId>${xml(userId, "the user")}</UserId>
    </LogonTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">
      <UserId>${xml(userId, "the user")}</UserId>
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <AllowHardTerminate>true</AllowHardTerminate>
    <StartWhenAvailable>true</StartWhenAvailable>
    <RunOnlyIfNetworkAvailable>false</RunOnlyIfNetworkAvailable>
    <IdleSettings>
      <StopOnIdleEnd>false</StopOnIdleEnd>
      <RestartOnIdle>false</RestartOnIdle>
    </IdleSettings>
    <AllowStartOnDemand>true</AllowStartOnDemand>
    <Enabled>true</Enabled>
    <Hidden>false</Hidden>
    <RunOnlyIfIdle>false</RunOnlyIfIdle>
    <WakeToRun>false</WakeToRun>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <Priority>7</Priority>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>999</Count>
    </RestartOnFailure>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>${xml(program!, "the executable's path")}</Command>
      <Arguments>${xml(quoted, "the arguments")}</Arguments>
      <WorkingDirectory>${xml(spec.workingDirectory, "the working directory")}</WorkingDirectory>
    </Exec>
  </Actions>
</Task>
`;
}

/** `schtasks` reads task XML as UTF-16 with a byte order mark. */
export function utf16le(text: string): Buffer {
  return Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text.replace(/\n/g, "\r\n"), "utf16le")]);
}
