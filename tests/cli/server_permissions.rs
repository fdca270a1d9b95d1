//! Who may do what on a server (spec section 22): the four roles of an organization against
//! the operations of the permission table, through the command line, each denial changing
//! nothing in the event log; attribution on the records; `apply.min_approvals`.

use serde_json::Value;

use crate::support::server::Server;
use crate::support::{Env, git_repo};

/// The organization's roles, weakest first, and the user holding each.
const ROLES: [(&str, &str); 4] = [
    ("viewer", "vic"),
    ("member", "meg"),
    ("maintainer", "mat"),
    ("owner", "olga"),
];

const NOTES: &str = "definition-of-done: NOTES.md says hello\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: write\n    run: printf 'hello\\n' > NOTES.md\n";

/// A server with the organization `acme` (one user per role), its action `acme/notes`, a
/// project `acme/web-ROLE` on a repository of its own for each role, a resource
/// `acme/prod-db` its policy restricts to owners, and a client whose token is each user's.
struct Team {
    server: Server,
    admin: Env,
    tokens: Vec<String>,
}

impl Team {
    fn new() -> Self {
        Self::with(&ROLES, &["zed"])
    }

    /// `acme` with `members` (role, user; the first owner founds it) and users `others`
    /// outside it; a token for each member, in order.
    fn with(members: &[(&str, &str)], others: &[&str]) -> Self {
        let host = Env::new();
        // A provider for the actor that brings `acme/deploy`; never called (the plans that
        // use it stop before Strategize).
        std::fs::create_dir_all(host.config_path.parent().unwrap()).unwrap();
        std::fs::write(
            &host.config_path,
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\napi_key_env = \"SCRIPTED_API_KEY\"\n",
        )
        .unwrap();
        let server = Server::start(host);
        let admin = Env::new();
        let team = Team {
            server,
            admin,
            tokens: Vec::new(),
        };
        for user in members
            .iter()
            .map(|(_, u)| *u)
            .chain(others.iter().copied())
        {
            team.admin_ok(&["server", "user", "add", user]);
        }
        let founder = members.iter().find(|(r, _)| *r == "owner").unwrap().1;
        team.admin_ok(&["server", "org", "add", "acme", "--owner", founder]);
        for (role, user) in members.iter().filter(|(_, u)| *u != founder) {
            team.admin_ok(&[
                "server", "org", "member", "add", "acme", user, "--role", role,
            ]);
        }
        let tokens = members
            .iter()
            .map(|(_, user)| {
                let doc = team.admin_ok(&["server", "token", "create", "--user", user]);
                doc["data"]["token"].as_str().unwrap().to_string()
            })
            .collect();
        let team = Team { tokens, ..team };
        team.define_acme(members);
        team
    }

    fn define_acme(&self, members: &[(&str, &str)]) {
        let root = self.server.env.root().to_path_buf();
        self.action("acme/notes");
        self.definition(
            "skill",
            "skill:\n  name: acme/deploy\n  description: Deploys\n  includes: [file_operations]\n",
        );
        self.definition(
            "actor",
            "name: acme/deployer\nmodel: scripted/m\nskills: [acme/deploy]\n",
        );
        self.definition(
            "action",
            "name: acme/deploy-notes\ndefinition-of-done: deployed\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: acme/deployer\n",
        );
        let mut roles: Vec<&str> = members.iter().map(|(r, _)| *r).collect();
        roles.dedup();
        for role in roles {
            self.action(&format!("acme/edit-{role}"));
            let repo = git_repo(&root, &format!("repo-{role}"));
            let resource = format!("acme/repo-{role}");
            let project = format!("acme/web-{role}");
            self.admin_ok(&[
                "resource",
                "add",
                "git-checkout",
                &resource,
                "--path",
                repo.to_str().unwrap(),
            ]);
            self.admin_ok(&["project", "create", &project]);
            self.admin_ok(&["project", "link-resource", &project, &resource]);
        }
        let prod = git_repo(&root, "prod");
        self.admin_ok(&[
            "resource",
            "add",
            "git-checkout",
            "acme/prod-db",
            "--path",
            prod.to_str().unwrap(),
        ]);
        self.set_policy(
            "resources:\n  restricted:\n    acme/prod-db: owner\n    acme/prod-new: owner\nskills:\n  restricted:\n    acme/deploy: owner\n",
        );
    }

    fn set_policy(&self, yaml: &str) {
        let policy = self.admin.root().join("policy.yaml");
        std::fs::write(&policy, yaml).unwrap();
        self.admin_ok(&[
            "server",
            "policy",
            "set",
            "acme",
            "--config",
            policy.to_str().unwrap(),
        ]);
    }

    /// Registers a definition of `kind` (`skill`, `actor`, `action`) from `yaml`.
    fn definition(&self, kind: &str, yaml: &str) {
        let file = self.admin.root().join(format!("{kind}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let mut args = vec![kind, "add", "--config", file.to_str().unwrap()];
        if kind == "action" {
            args = vec![
                "action",
                "create",
                "--available",
                "--config",
                file.to_str().unwrap(),
            ];
        }
        self.admin_ok(&args);
    }

    fn action(&self, name: &str) {
        let file = self
            .admin
            .root()
            .join(format!("{}.yaml", name.replace('/', "-")));
        std::fs::write(&file, format!("name: {name}\n{NOTES}")).unwrap();
        self.admin_ok(&[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ]);
    }

    fn admin_ok(&self, args: &[&str]) -> Value {
        let (doc, code) = self.server.client_json(&self.admin, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
        doc
    }

    /// Runs `args` as the user holding role number `who`: the JSON document and exit code.
    fn run_as(&self, who: usize, args: &[&str]) -> (Value, i32) {
        let mut cmd = self
            .server
            .client(&self.admin, &[&["--format", "json"], args].concat());
        cmd.env("AGENTS_TOKEN", &self.tokens[who]);
        let out = cmd.output().expect("the binary runs");
        let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (doc, out.status.code().unwrap_or(-1))
    }

    /// A plan of `acme/notes` on role `role`'s project, made by the administrator and run
    /// under `profile` to its first stop.
    fn plan(&self, role: &str, profile: &str) -> String {
        let project = format!("acme/web-{role}");
        let (doc, code) = self.server.client_json(
            &self.admin,
            &[
                "plan",
                "use",
                "acme/notes",
                &project,
                "--automation-profile",
                profile,
            ],
        );
        assert_eq!(code, 3, "{doc:#}");
        doc["data"]["plan_id"].as_str().unwrap().to_string()
    }

    /// The id of the plan's last decision.
    fn last_decision(&self, plan: &str) -> String {
        let body = format!(r#"{{"call":"decisions","plan":"{plan}"}}"#);
        let (status, body) = self
            .server
            .http("POST", "/v1/call", Some(&self.server.token), &body);
        assert_eq!(status, 200, "{body}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        let decisions = doc["data"].as_array().unwrap();
        decisions.last().unwrap()["decision_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The newest event's sequence number.
    fn last_seq(&self) -> i64 {
        let (status, body) = self.server.http(
            "POST",
            "/v1/call",
            Some(&self.server.token),
            r#"{"call":"last_seq"}"#,
        );
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()["data"]
            .as_i64()
            .unwrap()
    }
}

/// The arguments of one operation for the role number given.
type Args = Box<dyn Fn(&Fixtures, usize) -> Vec<String>>;

/// One operation of the table: how to run it for a role, the exit code it has when allowed,
/// and which roles may.
struct Row {
    what: &'static str,
    args: Args,
    allowed_exit: &'static [i32],
    allowed: [bool; 4],
}

/// What each role's operations act on.
struct Fixtures {
    /// At the apply gate (review, apply).
    gated: Vec<String>,
    /// Waiting at the gate before Execute (approve).
    supervised: Vec<String>,
    /// At the apply gate (cancel).
    to_cancel: Vec<String>,
    /// A decision of a plan at the apply gate (correct).
    decisions: Vec<String>,
    dir: std::path::PathBuf,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

fn table() -> Vec<Row> {
    let role = |i: usize| ROLES[i].0;
    vec![
        Row {
            what: "read a plan",
            args: Box::new(|f, i| strings(&["plan", "status", &f.gated[i]])),
            allowed_exit: &[0, 3],
            allowed: [true, true, true, true],
        },
        Row {
            what: "create an org action",
            args: Box::new(move |f, i| {
                let file = f.dir.join(format!("made-{}.yaml", role(i)));
                std::fs::write(&file, format!("name: acme/made-{}\n{NOTES}", role(i))).unwrap();
                strings(&["action", "create", "--config", file.to_str().unwrap()])
            }),
            allowed_exit: &[0],
            allowed: [false, false, true, true],
        },
        Row {
            what: "edit an org action",
            args: Box::new(move |_, i| {
                strings(&["action", "archive", &format!("acme/edit-{}", role(i))])
            }),
            allowed_exit: &[0],
            allowed: [false, false, true, true],
        },
        Row {
            what: "run an org action",
            args: Box::new(move |_, i| {
                strings(&[
                    "plan",
                    "use",
                    "acme/notes",
                    &format!("acme/web-{}", role(i)),
                    "--automation-profile",
                    "trusted",
                ])
            }),
            allowed_exit: &[3],
            allowed: [false, true, true, true],
        },
        Row {
            what: "register a restricted resource",
            args: Box::new(|f, _| {
                let path = f.dir.join("prod-new");
                std::fs::create_dir_all(&path).unwrap();
                strings(&[
                    "resource",
                    "add",
                    "fs-directory",
                    "acme/prod-new",
                    "--path",
                    path.to_str().unwrap(),
                ])
            }),
            allowed_exit: &[0],
            allowed: [false, false, false, true],
        },
        Row {
            what: "link a restricted resource",
            args: Box::new(move |_, i| {
                strings(&[
                    "project",
                    "link-resource",
                    &format!("acme/web-{}", role(i)),
                    "acme/prod-db",
                ])
            }),
            allowed_exit: &[0],
            allowed: [false, false, false, true],
        },
        Row {
            what: "use a restricted skill",
            args: Box::new(move |_, i| {
                strings(&[
                    "plan",
                    "use",
                    "acme/deploy-notes",
                    &format!("acme/web-{}", role(i)),
                    "--automation-profile",
                    "manual",
                ])
            }),
            allowed_exit: &[3],
            allowed: [false, false, false, true],
        },
        Row {
            what: "approve (run Execute past its gate)",
            args: Box::new(|f, i| strings(&["plan", "execute", &f.supervised[i]])),
            allowed_exit: &[0, 3],
            allowed: [false, false, true, true],
        },
        Row {
            what: "review",
            args: Box::new(|f, i| {
                strings(&["plan", "review", &f.gated[i], "--accept", "NOTES.md"])
            }),
            allowed_exit: &[0],
            allowed: [false, true, true, true],
        },
        Row {
            what: "apply",
            args: Box::new(|f, i| strings(&["plan", "apply", "--yes", &f.gated[i]])),
            allowed_exit: &[0],
            allowed: [false, false, true, true],
        },
        Row {
            what: "correct",
            args: Box::new(|f, i| {
                strings(&[
                    "plan",
                    "correct",
                    &f.decisions[i],
                    "--mode",
                    "revert",
                    "--guidance",
                    "say hello twice",
                    "--yes",
                ])
            }),
            allowed_exit: &[0, 3],
            allowed: [false, true, true, true],
        },
        Row {
            what: "cancel",
            args: Box::new(|f, i| strings(&["plan", "cancel", &f.to_cancel[i]])),
            allowed_exit: &[0],
            allowed: [false, true, true, true],
        },
        Row {
            what: "change a policy",
            args: Box::new(|f, _| {
                let file = f.dir.join("stricter.yaml");
                std::fs::write(&file, "apply:\n  min_approvals: 1\n").unwrap();
                strings(&[
                    "server",
                    "policy",
                    "set",
                    "acme",
                    "--config",
                    file.to_str().unwrap(),
                ])
            }),
            allowed_exit: &[0],
            allowed: [false, false, false, true],
        },
        Row {
            what: "add a member",
            args: Box::new(|_, _| {
                strings(&[
                    "server", "org", "member", "add", "acme", "zed", "--role", "viewer",
                ])
            }),
            allowed_exit: &[0],
            allowed: [false, false, false, true],
        },
        Row {
            what: "read the audit log",
            args: Box::new(|_, _| strings(&["server", "audit", "--org", "acme"])),
            allowed_exit: &[0],
            allowed: [false, false, false, true],
        },
        Row {
            what: "read the plan's events",
            args: Box::new(|f, i| strings(&["plan", "events", &f.gated[i]])),
            allowed_exit: &[0],
            allowed: [true, true, true, true],
        },
    ]
}

#[test]
fn four_roles_against_the_permission_table_get_exactly_the_expected_answers_and_denials_change_nothing()
 {
    let team = Team::new();
    let mut f = Fixtures {
        gated: Vec::new(),
        supervised: Vec::new(),
        to_cancel: Vec::new(),
        decisions: Vec::new(),
        dir: team.admin.root().to_path_buf(),
    };
    for (role, _) in ROLES {
        f.gated.push(team.plan(role, "trusted"));
        f.supervised.push(team.plan(role, "supervised"));
        f.to_cancel.push(team.plan(role, "trusted"));
        let corrected = team.plan(role, "trusted");
        f.decisions.push(team.last_decision(&corrected));
    }
    let mut wrong = Vec::new();
    for row in table() {
        for (i, (role, user)) in ROLES.iter().enumerate() {
            let args = (row.args)(&f, i);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let before = team.last_seq();
            let (doc, code) = team.run_as(i, &args);
            let denied = code == 4 && doc["error"]["code"] == "PERMISSION_DENIED";
            if row.allowed[i] && !row.allowed_exit.contains(&code) {
                wrong.push(format!("{role} {user} may {}: exit {code} {doc}", row.what));
            }
            if !row.allowed[i] {
                if !denied {
                    wrong.push(format!(
                        "{role} {user} may not {}: exit {code} {doc}",
                        row.what
                    ));
                } else if team.last_seq() != before {
                    wrong.push(format!("{role} {user}'s denied {} wrote events", row.what));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn two_maintainers_must_approve_an_apply_when_the_policy_asks_two_and_the_commit_names_both() {
    let members = [
        ("member", "meg"),
        ("maintainer", "mat"),
        ("maintainer", "max"),
        ("owner", "olga"),
    ];
    let team = Team::with(&members, &[]);
    team.set_policy("apply:\n  min_approvals: 2\n");
    // meg, a member, makes the plan: her approval would not count even if she could apply.
    let (doc, code) = team.run_as(
        0,
        &[
            "plan",
            "use",
            "acme/notes",
            "acme/web-member",
            "--automation-profile",
            "trusted",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();

    let (doc, code) = team.run_as(1, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NEEDS_APPROVAL");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("1 of 2"), "{message}");
    assert_eq!(doc["data"]["approvers"], serde_json::json!(["mat"]));
    // The same maintainer again adds nothing.
    let (doc, code) = team.run_as(1, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 3, "{doc:#}");
    assert!(doc["error"]["message"].as_str().unwrap().contains("1 of 2"));

    let (doc, code) = team.run_as(2, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let repo = team.server.env.root().join("repo-member");
    let log = std::process::Command::new("git")
        .args(["log", "-1", "--format=%B"])
        .current_dir(&repo)
        .output()
        .unwrap();
    let message = String::from_utf8(log.stdout).unwrap();
    assert!(message.contains("Approved-by: mat\n"), "{message}");
    assert!(message.contains("Approved-by: max\n"), "{message}");

    // The records name the humans: plan status and the events.
    let (doc, code) = team.run_as(3, &["plan", "status", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let who = &doc["data"]["attribution"];
    assert_eq!(who["created_by"], "meg", "{who:#}");
    assert_eq!(who["driven_by"], "max", "{who:#}");
    let (doc, code) = team.run_as(3, &["plan", "events", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let events = doc["data"]["events"].as_array().unwrap();
    let by = |kind: &str| {
        events
            .iter()
            .find(|e| e["type"] == kind)
            .map(|e| e["caused_by"].clone())
    };
    assert_eq!(by("plan_created"), Some(Value::from("meg")), "{events:#?}");
    assert_eq!(
        by("apply_complete"),
        Some(Value::from("max")),
        "{events:#?}"
    );

    // The audit log has each human's Apply, the one that waited too.
    let (doc, code) = team.run_as(3, &["server", "audit", "--org", "acme"]);
    assert_eq!(code, 0, "{doc:#}");
    let applies: Vec<&Value> = doc["data"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["operation"] == "run.apply")
        .map(|r| &r["user"])
        .collect();
    let expected = ["mat", "mat", "max"].map(Value::from);
    assert_eq!(applies, expected.iter().collect::<Vec<_>>(), "{doc:#}");
}

#[test]
fn a_creator_who_is_a_maintainer_does_not_count_toward_the_approvals() {
    let members = [
        ("maintainer", "mat"),
        ("maintainer", "max"),
        ("owner", "olga"),
    ];
    let team = Team::with(&members, &[]);
    team.set_policy("apply:\n  min_approvals: 1\n");
    let (doc, code) = team.run_as(
        0,
        &[
            "plan",
            "use",
            "acme/notes",
            "acme/web-maintainer",
            "--automation-profile",
            "trusted",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (doc, code) = team.run_as(0, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 3, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("creator does not count") && message.contains("0 of 1"),
        "{message}"
    );
    let (doc, code) = team.run_as(1, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
}

#[test]
fn a_policy_refusal_is_audited_and_a_member_reads_a_plans_tree_as_the_tui_does() {
    let members = [("member", "meg"), ("owner", "olga")];
    let team = Team::with(&members, &[]);
    team.set_policy("profiles:\n  allowed: [trusted]\n");
    let web = "acme/web-member";
    let use_as = |profile: &str| {
        team.run_as(
            0,
            &[
                "plan",
                "use",
                "acme/notes",
                web,
                "--automation-profile",
                profile,
            ],
        )
    };
    let (doc, code) = use_as("full-auto");
    assert_eq!(
        (code, &doc["error"]["code"]),
        (4, &Value::from("POLICY_DENIED")),
        "{doc:#}"
    );
    let (doc, code) = team.run_as(1, &["server", "audit", "--org", "acme"]);
    assert_eq!(code, 0, "{doc:#}");
    let refused = doc["data"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["operation"] == "run.use" && r["user"] == "meg")
        .unwrap_or_else(|| panic!("no row of meg's refused plan use: {doc:#}"));
    assert_eq!(refused["allowed"], false, "{refused:#}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("profiles.allowed"),
        "{refused:#}"
    );

    // The TUI reads a plan's tree and changes through the session views: a member may.
    let (doc, code) = use_as("trusted");
    assert_eq!(code, 3, "{doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap();
    for query in ["plan_tree", "plan_changes"] {
        let body = format!(r#"{{"call":"session","query":"{query}","plan":"{plan}"}}"#);
        let (status, answer) = team
            .server
            .http("POST", "/v1/call", Some(&team.tokens[0]), &body);
        assert_eq!(status, 200, "{query}: {answer}");
    }
}

#[test]
fn an_item_named_by_its_id_is_checked_in_its_own_namespace_not_the_callers() {
    let members = [("member", "meg"), ("owner", "olga")];
    let team = Team::with(&members, &[]);
    let (doc, code) = team.run_as(0, &["action", "show", "acme/notes"]);
    assert_eq!(code, 0, "{doc:#}");
    let id = doc["data"]["action"]["action_id"]
        .as_str()
        .or_else(|| doc["data"]["action_id"].as_str())
        .unwrap_or_else(|| panic!("an action id: {doc:#}"))
        .to_string();
    // meg, a member, may not remove acme's items: by name or by id (or its prefix).
    for given in [id.as_str(), &id[..12], "acme/notes"] {
        for verb in ["delete", "archive"] {
            let mut args = vec!["action", verb, given];
            if verb == "delete" {
                args.push("--yes");
            }
            let (doc, code) = team.run_as(0, &args);
            assert_eq!(
                (code, doc["error"]["code"].as_str()),
                (4, Some("PERMISSION_DENIED")),
                "{args:?}: {doc:#}"
            );
        }
    }
    let (doc, code) = team.run_as(0, &["action", "show", "acme/notes"]);
    assert_eq!(code, 0, "the action is still there: {doc:#}");
}

#[test]
fn a_users_own_namespace_is_theirs_to_read_and_other_users_neither_list_nor_show_it() {
    let members = [("member", "meg"), ("owner", "olga")];
    let team = Team::with(&members, &[]);
    let repo = git_repo(team.server.env.root(), "megs-notes");
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "meg/notes",
            "--path",
            repo.to_str().unwrap(),
        ][..],
        &["project", "create", "--resource", "meg/notes", "meg/diary"],
    ] {
        let (doc, code) = team.run_as(0, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
    let names = |who: usize, what: &str, field: &str| -> Vec<String> {
        let (doc, code) = team.run_as(who, &[what, "list"]);
        assert_eq!(code, 0, "{doc:#}");
        let key = if what == "resource" {
            "resources"
        } else {
            "projects"
        };
        doc["data"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r[field].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert!(names(0, "resource", "name").contains(&"meg/notes".to_string()));
    assert!(names(0, "project", "name").contains(&"meg/diary".to_string()));
    assert!(!names(1, "resource", "name").contains(&"meg/notes".to_string()));
    assert!(!names(1, "project", "name").contains(&"meg/diary".to_string()));
    for args in [
        &["resource", "show", "meg/notes"][..],
        &["project", "show", "meg/diary"],
    ] {
        let (doc, code) = team.run_as(1, args);
        assert_eq!(
            (code, doc["error"]["code"].as_str()),
            (4, Some("PERMISSION_DENIED")),
            "{args:?}: {doc:#}"
        );
    }
    // Built-in items stay everyone's to read.
    let (doc, code) = team.run_as(0, &["actor", "show", "builtin/checklist-strategist"]);
    assert_eq!(code, 0, "{doc:#}");
}
