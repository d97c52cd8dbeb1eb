//! The sample data room compiled into the binary, so `graph run memo --input Fernstone` works
//! from an installed `graph` whose source tree is gone.
//!
//! The memo searches and cites real files (`file://` hits, line-quoted passages), so the sample
//! is written out as files before it is read: into the user's cache folder, once, and again only
//! when a file there is missing or differs from the bundled text (a file someone edited there is
//! put back, since the sample is the binary's, not theirs; their own rooms live elsewhere).

use std::path::{Path, PathBuf};

/// The folder name of the bundled rooms, as the default `dataroom` setting names it.
pub(crate) const SAMPLE_ROOMS: &str = "examples/dataroom";

/// The companies whose rooms are bundled, by slug, with their files.
const BUNDLED: &[(&str, &[(&str, &str)])] = &[(
    "fernstone",
    &[
        (
            "competition.md",
            include_str!("../../../../examples/dataroom/fernstone/competition.md"),
        ),
        (
            "customers.md",
            include_str!("../../../../examples/dataroom/fernstone/customers.md"),
        ),
        (
            "deck.md",
            include_str!("../../../../examples/dataroom/fernstone/deck.md"),
        ),
        (
            "financials.md",
            include_str!("../../../../examples/dataroom/fernstone/financials.md"),
        ),
        (
            "market.md",
            include_str!("../../../../examples/dataroom/fernstone/market.md"),
        ),
        (
            "press.md",
            include_str!("../../../../examples/dataroom/fernstone/press.md"),
        ),
        (
            "team.md",
            include_str!("../../../../examples/dataroom/fernstone/team.md"),
        ),
        (
            "terms.md",
            include_str!("../../../../examples/dataroom/fernstone/terms.md"),
        ),
        (
            "trademark.md",
            include_str!("../../../../examples/dataroom/fernstone/trademark.md"),
        ),
    ],
)];

/// The companies whose rooms are bundled, by folder name.
pub(crate) fn bundled() -> impl Iterator<Item = &'static str> {
    BUNDLED.iter().map(|(slug, _)| *slug)
}

/// Where the bundled rooms are written: `<cache>/stategraph/dataroom/`.
pub(crate) fn default_unpack_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join("stategraph").join("dataroom"))
}

/// Writes the bundled room of `slug` under `under` and returns its folder, or `None` when no room
/// of that company is bundled.
pub(crate) fn unpack(slug: &str, under: &Path) -> Result<Option<PathBuf>, String> {
    let Some((_, files)) = BUNDLED.iter().find(|(name, _)| *name == slug) else {
        return Ok(None);
    };
    let dir = under.join(slug);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "cannot write the bundled sample data room to {}: {e}",
            dir.display()
        )
    })?;
    for (name, text) in files.iter() {
        write_if_different(&dir.join(name), text)?;
    }
    Ok(Some(dir))
}

/// Replaces `path` with `text` unless it already holds exactly that; through a temporary file
/// and a rename, so a reader (another run unpacking the same room) never sees half a file.
fn write_if_different(path: &Path, text: &str) -> Result<(), String> {
    if std::fs::read(path).is_ok_and(|held| held == text.as_bytes()) {
        return Ok(());
    }
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(cannot)?;
    std::io::Write::write_all(&mut temp, text.as_bytes()).map_err(cannot)?;
    temp.persist(path).map_err(|e| cannot(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_room_is_the_sample_on_disk() {
        let on_disk =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dataroom/fernstone");
        let mut names: Vec<String> = std::fs::read_dir(&on_disk)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let bundled: Vec<&str> = BUNDLED[0].1.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, bundled, "a file of the sample room is not bundled");
    }

    #[test]
    fn unpacking_writes_the_room_and_mends_an_edited_file() {
        let under = tempfile::tempdir().unwrap();
        let dir = unpack("fernstone", under.path()).unwrap().unwrap();
        let deck = std::fs::read_to_string(dir.join("deck.md")).unwrap();
        assert!(deck.contains("Fernstone"), "{deck}");
        std::fs::write(dir.join("deck.md"), "edited").unwrap();
        std::fs::remove_file(dir.join("terms.md")).unwrap();
        unpack("fernstone", under.path()).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("deck.md")).unwrap(), deck);
        assert!(dir.join("terms.md").is_file());
        assert_eq!(unpack("acme", under.path()).unwrap(), None);
    }
}
