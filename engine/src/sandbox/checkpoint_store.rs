//! The checkpoint store: a bare git repository every server instance can read (spec section
//! 21, "a server that dies loses nothing"; `checkpoint-store` in `config.toml`), so that a
//! plan's sandbox can be rebuilt at its last checkpoint on another machine.
//!
//! A sandbox lives on the disk of the instance driving its plan. When a store is configured,
//! the objects of the sandbox's base, of each checkpoint commit and of each tree a step's
//! journal records are copied into it as they are made, each kept reachable by a ref:
//!
//! ```text
//! refs/plans/<plan id>/<sandbox id>/base
//! refs/plans/<plan id>/<sandbox id>/checkpoints/<checkpoint id>
//! refs/plans/<plan id>/<sandbox id>/trees/<tree id>
//! ```
//!
//! Only the objects a sandbox wrote itself are copied: a `git_worktree` sandbox borrows the
//! user's objects (the base commit and its history) through `objects/info/alternates`, and
//! its rebuild borrows them the same way, from the resource's path every instance reads. A
//! copy writes an object's children before the object itself, so an object found in the store
//! has everything it reaches there too (or borrowed); copies are idempotent and loose objects
//! are written atomically, so instances may copy at the same time.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Odb, Oid, Repository};

use super::{Layout, SandboxError, open_repo};
use crate::domain::id::Id;

/// The configured checkpoint store (a directory holding a bare git repository, created on
/// first use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointStore {
    dir: PathBuf,
}

impl CheckpointStore {
    /// The store in `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn open(&self) -> Result<Repository, SandboxError> {
        if let Ok(repo) = Repository::open_bare(&self.dir) {
            return Ok(repo);
        }
        let mut opts = git2::RepositoryInitOptions::new();
        opts.bare(true).mkpath(true);
        let repo = Repository::init_opts(&self.dir, &opts).map_err(SandboxError::git(format!(
            "creating the checkpoint store {}",
            self.dir.display()
        )))?;
        repo.config()
            .and_then(|mut c| c.set_str("gc.auto", "0"))
            .map_err(SandboxError::git("configuring the checkpoint store"))?;
        Ok(repo)
    }

    /// Copies what `object` (a commit or a tree of the sandbox in `layout`) reaches and the
    /// store lacks into the store, then points `refs/plans/<plan>/<sandbox>/<name>` at it.
    ///
    /// # Errors
    /// [`SandboxError::Git`] or [`SandboxError::Io`] when the store cannot be written.
    pub fn push(
        &self,
        layout: &Layout,
        plan: &Id,
        sandbox: &Id,
        object: Oid,
        name: &str,
    ) -> Result<(), SandboxError> {
        let source = open_repo(layout)?;
        let store = self.open()?;
        let borrowed = borrowed_objects(&layout.git_dir)?;
        copy_reachable(&source, &store, &borrowed, object)?;
        let copied = store
            .odb()
            .map_err(SandboxError::git("opening the checkpoint store"))?
            .exists(object);
        if !copied {
            // Borrowed from the user's repository, as the rebuild will borrow it.
            return Ok(());
        }
        store
            .reference(
                &format!("{}{name}", ref_prefix(plan, sandbox)),
                object,
                true,
                "checkpoint store",
            )
            .map_err(SandboxError::git("recording the object in the checkpoint store"))?;
        Ok(())
    }

    /// Copies every object the store keeps for (plan, sandbox) that the sandbox in `layout`
    /// cannot read yet into its private repository.
    ///
    /// # Errors
    /// [`SandboxError::Git`] when the store or the sandbox cannot be read or written.
    pub fn fetch(&self, layout: &Layout, plan: &Id, sandbox: &Id) -> Result<usize, SandboxError> {
        let store = self.open()?;
        let target = open_repo(layout)?;
        let glob = format!("{}*", ref_prefix(plan, sandbox));
        let refs = store
            .references_glob(&glob)
            .map_err(SandboxError::git("listing the checkpoint store"))?;
        let mut roots = Vec::new();
        for r in refs {
            let r = r.map_err(SandboxError::git("reading the checkpoint store"))?;
            if let Some(oid) = r.target() {
                roots.push(oid);
            }
        }
        for oid in &roots {
            copy_reachable(&store, &target, &[], *oid)?;
        }
        Ok(roots.len())
    }
}

fn ref_prefix(plan: &Id, sandbox: &Id) -> String {
    format!("refs/plans/{plan}/{sandbox}/")
}

/// The object databases of user repositories a sandbox borrows (the lines of its
/// `objects/info/alternates`). A child plan's sandbox borrows its parent's private
/// repository, whose own objects may never have been copied (a snapshot no checkpoint kept):
/// that one is looked through to the user's repository it borrows in turn.
fn borrowed_objects(git_dir: &Path) -> Result<Vec<Odb<'static>>, SandboxError> {
    let mut out = Vec::new();
    let mut dirs = vec![git_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let file = dir.join("objects/info/alternates");
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let objects = Path::new(line);
            if let Some(repo) = objects.parent()
                && Repository::open_bare(repo)
                    .is_ok_and(|r| r.find_reference(super::PLAN_REF).is_ok())
            {
                if dirs.len() < 8 {
                    dirs.push(repo.to_path_buf());
                }
                continue;
            }
            let odb = Odb::new().map_err(SandboxError::git("opening borrowed objects"))?;
            odb.add_disk_alternate(line)
                .map_err(SandboxError::git(format!("opening borrowed objects {line}")))?;
            out.push(odb);
        }
    }
    Ok(out)
}

/// Copies `root` and what it reaches from `from` into `to`, except what `to` has or can
/// borrow already and what `skip` holds; children are written before their parents.
fn copy_reachable(
    from: &Repository,
    to: &Repository,
    skip: &[Odb<'_>],
    root: Oid,
) -> Result<(), SandboxError> {
    let from_odb = from
        .odb()
        .map_err(SandboxError::git("opening the objects to copy"))?;
    let to_odb = to
        .odb()
        .map_err(SandboxError::git("opening the objects to copy into"))?;
    let mut seen = HashSet::new();
    let mut stack = vec![(root, false)];
    while let Some((oid, expanded)) = stack.pop() {
        if expanded {
            let object = from_odb
                .read(oid)
                .map_err(SandboxError::git(format!("reading object {oid}")))?;
            to_odb
                .write(object.kind(), object.data())
                .map_err(SandboxError::git(format!("copying object {oid}")))?;
            continue;
        }
        if !seen.insert(oid) || to_odb.exists(oid) || skip.iter().any(|o| o.exists(oid)) {
            continue;
        }
        stack.push((oid, true));
        let (_, kind) = from_odb
            .read_header(oid)
            .map_err(SandboxError::git(format!("reading object {oid}")))?;
        match kind {
            ObjectType::Commit => {
                let commit = from
                    .find_commit(oid)
                    .map_err(SandboxError::git("reading a commit to copy"))?;
                stack.push((commit.tree_id(), false));
                stack.extend(commit.parent_ids().map(|p| (p, false)));
            }
            ObjectType::Tree => {
                let tree = from
                    .find_tree(oid)
                    .map_err(SandboxError::git("reading a tree to copy"))?;
                // Gitlinks name commits of other repositories: nothing to copy.
                stack.extend(
                    tree.iter()
                        .filter(|e| e.kind() != Some(ObjectType::Commit))
                        .map(|e| (e.id(), false)),
                );
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;
    use crate::sandbox::checkpoint::{self, CheckpointRequest};
    use crate::sandbox::testing::repo_with_files;
    use crate::sandbox::{SandboxTarget, Sandboxes, TargetKind};
    use crate::store::Store;
    use jiff::Timestamp;
    use std::fs;

    fn plan_with_target(store: &mut Store, kind: TargetKind) -> Id {
        let plan = Plan::new("local/x", "x", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let target = SandboxTarget {
            plan_id: plan.plan_id,
            resource_name: "local/user".into(),
            alias: None,
            kind,
            read_only: false,
        };
        Sandboxes::at("/nowhere")
            .register_target(store, &target)
            .unwrap();
        plan.plan_id
    }

    /// Two machines: each its own sandboxes directory, one database and one store.
    fn two_machines(dir: &Path) -> (Sandboxes, Sandboxes) {
        let shared = CheckpointStore::at(dir.join("shared/checkpoints"));
        (
            Sandboxes::at(dir.join("a/sandboxes")).with_checkpoint_store(Some(shared.clone())),
            Sandboxes::at(dir.join("b/sandboxes")).with_checkpoint_store(Some(shared)),
        )
    }

    fn run_on(a: &Sandboxes, store: &mut Store, plan: &Id) -> (Id, String) {
        let sb = a.ensure(store, plan, "local/user").unwrap();
        fs::write(sb.work_dir().join("a.txt"), "changed\n").unwrap();
        fs::write(sb.work_dir().join("new.txt"), "new, never committed anywhere\n").unwrap();
        let cp = checkpoint::create(
            store,
            a,
            plan,
            &CheckpointRequest {
                label: "end".into(),
                ..Default::default()
            },
        )
        .unwrap()
        .unwrap();
        // Written after the checkpoint: the rebuild does not have it.
        fs::write(sb.work_dir().join("late.txt"), "late\n").unwrap();
        (sb.record.sandbox_id, cp.states[0].commit_oid.clone())
    }

    #[test]
    fn a_sandbox_whose_machine_is_gone_is_rebuilt_from_the_store_at_its_last_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("user");
        let head = repo_with_files(&repo, &[("a.txt", "a\n"), ("d/b.txt", "b\n")]);
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = plan_with_target(
            &mut store,
            TargetKind::GitCheckout {
                repo: repo.clone(),
                base_commit: head,
            },
        );
        let (a, b) = two_machines(dir.path());
        let (sandbox, commit) = run_on(&a, &mut store, &plan);
        fs::remove_dir_all(a.root()).unwrap();

        let rebuilt = b.active(&store, &plan).unwrap();
        assert_eq!(rebuilt.len(), 1);
        let sb = &rebuilt[0];
        assert_eq!(sb.record.sandbox_id, sandbox);
        assert!(sb.layout.root.starts_with(b.root()), "{:?}", sb.layout.root);
        let work = sb.work_dir();
        assert_eq!(fs::read_to_string(work.join("a.txt")).unwrap(), "changed\n");
        assert_eq!(
            fs::read_to_string(work.join("new.txt")).unwrap(),
            "new, never committed anywhere\n"
        );
        assert_eq!(fs::read_to_string(work.join("d/b.txt")).unwrap(), "b\n");
        assert!(!work.join("late.txt").exists());
        let repo = sb.repo().unwrap();
        assert_eq!(
            repo.find_reference(crate::sandbox::PLAN_REF)
                .unwrap()
                .target()
                .unwrap()
                .to_string(),
            commit
        );
        assert_eq!(
            checkpoint::snapshot(&repo).unwrap(),
            repo.find_commit(Oid::from_str(&commit).unwrap())
                .unwrap()
                .tree_id(),
            "the rebuilt work tree is the checkpoint's tree"
        );
        // Only the sandbox's own objects went to the store: the base tree is borrowed.
        let shared = Repository::open_bare(dir.path().join("shared/checkpoints")).unwrap();
        let base = repo.find_commit(sb.base_commit().unwrap()).unwrap();
        assert!(!shared.odb().unwrap().exists(base.tree_id()));
        // A reader does not move the sandbox: the record still names the driver's path.
        assert!(
            store
                .sandbox(&plan, "local/user")
                .unwrap()
                .unwrap()
                .root_dir
                .starts_with(a.root())
        );
    }

    #[test]
    fn a_readers_copy_follows_new_checkpoints_and_the_lease_holder_moves_the_sandbox_to_itself() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("user");
        let head = repo_with_files(&repo, &[("a.txt", "a\n")]);
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = plan_with_target(
            &mut store,
            TargetKind::GitCheckout {
                repo,
                base_commit: head,
            },
        );
        let (a, b) = two_machines(dir.path());
        run_on(&a, &mut store, &plan);
        // B's machine cannot see A's disk: A's directory is moved away while B reads.
        let elsewhere = dir.path().join("a-elsewhere");
        let read = |b: &Sandboxes, store: &Store| {
            fs::rename(dir.path().join("a"), &elsewhere).unwrap();
            let sb = b.existing(store, &plan, "local/user").unwrap().unwrap();
            fs::rename(&elsewhere, dir.path().join("a")).unwrap();
            assert!(sb.layout.root.starts_with(b.root()));
            fs::read_to_string(sb.work_dir().join("a.txt")).unwrap()
        };
        assert_eq!(read(&b, &store), "changed\n");

        // The driver on A goes on: a checkpoint, then a tool call its step journal records.
        let on_a = a.existing(&store, &plan, "local/user").unwrap().unwrap();
        assert!(on_a.layout.root.starts_with(a.root()), "A keeps its own sandbox");
        fs::write(on_a.work_dir().join("a.txt"), "again\n").unwrap();
        let request = CheckpointRequest {
            label: "end".into(),
            ..Default::default()
        };
        checkpoint::create(&mut store, &a, &plan, &request).unwrap();
        assert_eq!(read(&b, &store), "again\n", "B's copy is brought to the new checkpoint");
        fs::write(on_a.work_dir().join("journaled.txt"), "after a tool call\n").unwrap();
        let trees = checkpoint::trees(&store, &a, &plan, false).unwrap();
        let journaled = Oid::from_str(&trees[0].1).unwrap();

        // A's machine is gone; B takes the plan's lease and resumes the step from its journal.
        fs::remove_dir_all(a.root()).unwrap();
        let _lease = crate::lease::acquire(&mut store, &plan, "execute").unwrap();
        let sb = b.ensure(&mut store, &plan, "local/user").unwrap();
        assert_eq!(
            store.sandbox(&plan, "local/user").unwrap().unwrap().root_dir,
            sb.layout.root,
            "the sandbox is recorded where its new driver rebuilt it"
        );
        checkpoint::restore_tree(&sb, journaled).unwrap();
        assert_eq!(
            fs::read_to_string(sb.work_dir().join("journaled.txt")).unwrap(),
            "after a tool call\n"
        );
    }

    #[test]
    fn a_child_plan_branched_from_its_parents_sandbox_is_rebuilt_with_the_parent_on_the_new_machine()
    {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("user");
        let head = repo_with_files(&repo, &[("a.txt", "a\n")]);
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let parent = plan_with_target(
            &mut store,
            TargetKind::GitCheckout {
                repo,
                base_commit: head,
            },
        );
        let (a, b) = two_machines(dir.path());
        let psb = a.ensure(&mut store, &parent, "local/user").unwrap();
        fs::write(psb.work_dir().join("before.txt"), "parent before the spawn\n").unwrap();
        let request = CheckpointRequest {
            label: "spawn".into(),
            ..Default::default()
        };
        let cp = checkpoint::create(&mut store, &a, &parent, &request)
            .unwrap()
            .unwrap();
        // The child branches from the parent's private repository at the spawn checkpoint.
        let child = plan_with_target(
            &mut store,
            TargetKind::GitCheckout {
                repo: psb.layout.git_dir.clone(),
                base_commit: cp.states[0].commit_oid.clone(),
            },
        );
        let csb = a.ensure(&mut store, &child, "local/user").unwrap();
        fs::write(csb.work_dir().join("child.txt"), "the child's work\n").unwrap();
        checkpoint::create(&mut store, &a, &child, &request).unwrap();
        fs::remove_dir_all(a.root()).unwrap();

        let sb = b.existing(&store, &child, "local/user").unwrap().unwrap();
        assert!(sb.layout.root.starts_with(b.root()));
        for (file, text) in [
            ("a.txt", "a\n"),
            ("before.txt", "parent before the spawn\n"),
            ("child.txt", "the child's work\n"),
        ] {
            assert_eq!(fs::read_to_string(sb.work_dir().join(file)).unwrap(), text);
        }
        let shared = Repository::open_bare(dir.path().join("shared/checkpoints")).unwrap();
        let child_commit = shared
            .find_reference(&format!("{}base", ref_prefix(&child, &sb.record.sandbox_id)))
            .unwrap()
            .target()
            .unwrap();
        assert_eq!(
            child_commit.to_string(),
            cp.states[0].commit_oid,
            "the child's base, its parent's checkpoint, is kept for the child too"
        );
        assert!(
            b.plan_dir(&parent).join(psb.record.sandbox_id.to_string()).join("git").is_dir(),
            "the parent's sandbox, which the child borrows from, was rebuilt here too"
        );
    }

    #[test]
    fn a_copied_directory_is_rebuilt_with_its_base_from_the_store_alone() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("project");
        fs::create_dir_all(source.join("d")).unwrap();
        fs::write(source.join("a.txt"), "a\n").unwrap();
        fs::write(source.join("d/b.txt"), "b\n").unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = plan_with_target(
            &mut store,
            TargetKind::Directory {
                root: source.clone(),
            },
        );
        let (a, b) = two_machines(dir.path());
        run_on(&a, &mut store, &plan);
        fs::remove_dir_all(a.root()).unwrap();
        // The directory changed since the plan copied it; the rebuild does not read it.
        fs::remove_dir_all(&source).unwrap();

        let sb = b.existing(&store, &plan, "local/user").unwrap().unwrap();
        let repo = sb.repo().unwrap();
        let base = repo.find_commit(sb.base_commit().unwrap()).unwrap();
        assert!(base.tree().unwrap().get_path(Path::new("d/b.txt")).is_ok());
        assert_eq!(fs::read_to_string(sb.work_dir().join("a.txt")).unwrap(), "changed\n");
        assert_eq!(fs::read_to_string(sb.work_dir().join("d/b.txt")).unwrap(), "b\n");
    }

    #[test]
    fn without_a_store_a_missing_sandbox_is_named_with_the_key_that_would_keep_it() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("user");
        let head = repo_with_files(&repo, &[("a.txt", "a\n")]);
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = plan_with_target(
            &mut store,
            TargetKind::GitCheckout {
                repo,
                base_commit: head,
            },
        );
        let a = Sandboxes::at(dir.path().join("a/sandboxes"));
        let sb = a.ensure(&mut store, &plan, "local/user").unwrap();
        fs::remove_dir_all(a.root()).unwrap();
        let err = Sandboxes::at(dir.path().join("b/sandboxes"))
            .active(&store, &plan)
            .unwrap_err();
        assert!(
            matches!(&err, SandboxError::Missing { path, .. } if *path == sb.layout.root),
            "{err:?}"
        );
        assert!(err.to_string().contains(&sb.layout.root.display().to_string()));
    }
}
