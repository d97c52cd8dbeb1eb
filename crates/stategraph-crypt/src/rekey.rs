//! [`EncryptedCheckpointer::rekey`]: a thread's records sealed again under the newest key, so
//! older keys can go.

use crate::envelope::Envelope;
use crate::records;
use crate::EncryptedCheckpointer;
use stategraph_checkpoint::{CheckpointError, CheckpointRecord, SealFault};

/// What [`EncryptedCheckpointer::rekey`] did to one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RekeyReport {
    /// Checkpoints sealed again under the current key.
    pub checkpoints: usize,
    /// Pending writes sealed again (as copies that stand for the old ones).
    pub writes: usize,
    /// Journal entries (recorded calls) sealed again under the current key.
    pub journal: usize,
    /// Records already under the current key, left alone.
    pub current: usize,
}

/// Checkpoints read per page while rewriting.
const PAGE: usize = 256;

impl EncryptedCheckpointer {
    /// Seals a thread's checkpoints, pending writes and journal entries again under the current
    /// key, reading what older configured keys (or, with
    /// [`reading_plaintext`](Self::reading_plaintext), no key) sealed. Records already under
    /// the current key are left alone, so running it again after an interruption finishes the
    /// job. The thread's subgraph namespaces (`{thread}/{ns}`) are rewritten with it. The caller
    /// holds the thread: nothing may write it meanwhile.
    ///
    /// A checkpoint and a journal entry are replaced in place; pending writes are only ever
    /// appended to a store, so each one is written again as a copy that stands for the old one
    /// (the old one is no longer read). Afterwards nothing of the thread needs an older key,
    /// not even a step that was paused or failed halfway with calls recorded under it.
    ///
    /// ```
    /// use stategraph_checkpoint::{Checkpointer, MemoryCheckpointer};
    /// use stategraph_crypt::{EncryptedCheckpointer, Key, Keyring};
    /// use std::sync::Arc;
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let backend = Arc::new(MemoryCheckpointer::new());
    /// let old = Key::new("2026-11", [1; 32])?;
    /// let new = Key::new("2026-12", [2; 32])?;
    /// let before = EncryptedCheckpointer::new(backend.clone(), Keyring::new(vec![old.clone()])?);
    /// before.put_journal("t1", "call", &serde_json::json!("paid for")).await?;
    /// // The new key first, the old one still configured while rekey reads it.
    /// let both = EncryptedCheckpointer::new(backend.clone(), Keyring::new(vec![new.clone(), old])?);
    /// assert_eq!(both.rekey("t1").await?.journal, 1);
    /// // The old key can go.
    /// let after = EncryptedCheckpointer::new(backend, Keyring::new(vec![new])?);
    /// assert_eq!(after.get_journal("t1", "call").await?, Some(serde_json::json!("paid for")));
    /// # Ok(()) }
    /// ```
    pub async fn rekey(&self, thread: &str) -> Result<RekeyReport, CheckpointError> {
        let Some(current) = self.current_key().map(str::to_string) else {
            return Err(CheckpointError::Sealed {
                thread: thread.to_string(),
                fault: SealFault::KeyMissing,
                detail: "no encryption key is configured to rewrite its records under".into(),
            });
        };
        let mut report = RekeyReport::default();
        let namespaces = self.inner().list_namespaces(thread).await?;
        for one in std::iter::once(thread).chain(namespaces.iter().map(String::as_str)) {
            let mut before = None;
            loop {
                let page = self.inner().list_checkpoints(one, before, PAGE).await?;
                let Some(last) = page.last() else { break };
                before = Some(last.id);
                for stored in page {
                    self.rekey_checkpoint(one, &current, stored, &mut report)
                        .await?;
                }
            }
            self.rekey_journal(one, &current, &mut report).await?;
        }
        self.inner().flush().await?;
        Ok(report)
    }

    /// One checkpoint in place, then its pending writes as copies.
    async fn rekey_checkpoint(
        &self,
        thread: &str,
        current: &str,
        stored: CheckpointRecord,
        report: &mut RekeyReport,
    ) -> Result<(), CheckpointError> {
        let id = stored.id;
        let env = records::checkpoint_envelope(&stored);
        if env.as_ref().and_then(|e| e.key_id()) == Some(current) {
            report.current += 1;
        } else {
            let open = self.open_checkpoint(thread, stored)?;
            let sealed = records::seal_checkpoint(self.cipher(), &open)?;
            self.inner().put_checkpoint(&sealed, false).await?;
            report.checkpoints += 1;
        }
        let stored = self.inner().get_writes(thread, id).await?;
        let mut copies = Vec::new();
        for (i, slot) in self
            .logical_writes(thread, id, stored)?
            .into_iter()
            .enumerate()
        {
            if slot.1.as_ref().and_then(|e| e.key_id()) == Some(current) {
                report.current += 1;
                continue;
            }
            let open = self.open_write(thread, id, slot)?;
            let n = u32::try_from(i).map_err(CheckpointError::storage)?;
            copies.push(records::seal_write(
                self.cipher(),
                thread,
                id,
                &open,
                Some(n),
            )?);
        }
        if !copies.is_empty() {
            self.inner().put_writes(thread, id, &copies, false).await?;
            report.writes += copies.len();
        }
        Ok(())
    }

    /// Every journal entry of the thread not under `current` (and not kept in the clear),
    /// overwritten under it.
    async fn rekey_journal(
        &self,
        thread: &str,
        current: &str,
        report: &mut RekeyReport,
    ) -> Result<(), CheckpointError> {
        for key in self.inner().list_journal(thread).await? {
            if self.clear_journal_key(&key) {
                continue;
            }
            // Listed but gone: removed with its checkpoint meanwhile, nothing to move.
            let Some(stored) = self.inner().get_journal(thread, &key).await? else {
                continue;
            };
            if Envelope::from_value(&stored)
                .as_ref()
                .and_then(|e| e.key_id())
                == Some(current)
            {
                report.current += 1;
                continue;
            }
            let open = self.open_journal(thread, &key, stored)?;
            let sealed = records::seal_journal(self.cipher(), thread, &key, &open)?;
            self.inner().put_journal(thread, &key, &sealed).await?;
            report.journal += 1;
        }
        Ok(())
    }
}
