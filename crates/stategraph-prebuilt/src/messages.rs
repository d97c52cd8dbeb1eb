//! A conversation kept in graph state: the add-messages reducer, and the trait through which
//! the tool node and the tools condition read and write any state that holds one.

use stategraph::state::State;
use stategraph_llm::{Message, Role};

/// The add-messages reducer, for `#[state(with = add_messages)] messages: Vec<Message>`.
///
/// Each incoming message is, by its [`Message::id`]:
/// - appended when its id is new (a message without an id gets the next free `m{n}`, counted
///   from the conversation's length, so the same writes always give the same ids);
/// - put in place of the stored message with the same id (replace);
/// - a [`Message::remove`] marker: the stored message with that id is dropped (an unknown id is
///   ignored, so replaying a removal is harmless).
///
/// ```
/// use stategraph_llm::Message;
/// use stategraph_prebuilt::add_messages;
/// let mut c = vec![Message::user("2+2?")];
/// add_messages(&mut c, vec![Message::assistant("5").with_id("r")]);
/// add_messages(&mut c, vec![Message::assistant("4").with_id("r"), Message::user("thanks")]);
/// let ids: Vec<_> = c.iter().map(|m| m.id.clone().unwrap()).collect();
/// assert_eq!(ids, ["m0", "r", "m2"]);
/// assert_eq!(c[1].content, "4");
/// ```
pub fn add_messages(current: &mut Vec<Message>, incoming: Vec<Message>) {
    // Stored messages always have ids; older writes without one are named where they sit.
    for (n, m) in current.iter_mut().enumerate() {
        if m.id.is_none() {
            m.id = Some(format!("m{n}"));
        }
    }
    for mut message in incoming {
        if message.remove {
            if let Some(id) = &message.id {
                current.retain(|m| m.id.as_ref() != Some(id));
            }
            continue;
        }
        match &message.id {
            Some(id) => {
                if let Some(slot) = current.iter_mut().find(|m| m.id.as_ref() == Some(id)) {
                    *slot = message;
                    continue;
                }
            }
            None => message.id = Some(free_id(current)),
        }
        current.push(message);
    }
}

fn free_id(current: &[Message]) -> String {
    let mut n = current.len();
    loop {
        let id = format!("m{n}");
        if !current.iter().any(|m| m.id.as_deref() == Some(id.as_str())) {
            return id;
        }
        n += 1;
    }
}

/// A state that holds a conversation, so the prebuilt [`ToolNode`](super::ToolNode) and
/// [`tools_condition`](super::tools_condition) work on it.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use stategraph_llm::Message;
/// use stategraph_prebuilt::{add_messages, MessagesState};
/// use stategraph::State;
///
/// #[derive(State, Clone, Default, Serialize, Deserialize)]
/// struct Chat {
///     #[state(with = add_messages)]
///     messages: Vec<Message>,
/// }
///
/// impl MessagesState for Chat {
///     fn messages(&self) -> &[Message] { &self.messages }
///     fn messages_update(messages: Vec<Message>) -> ChatUpdate {
///         ChatUpdate::default().messages(messages)
///     }
/// }
/// ```
pub trait MessagesState: State {
    /// The conversation, oldest first.
    fn messages(&self) -> &[Message];

    /// An update that writes `messages` through the field's add-messages reducer.
    fn messages_update(messages: Vec<Message>) -> Self::Update;

    /// The last message, if any.
    fn last_message(&self) -> Option<&Message> {
        self.messages().last()
    }

    /// The tool calls of the last message when it is the model's and has some.
    fn pending_tool_calls(&self) -> &[stategraph_llm::ToolCall] {
        match self.last_message() {
            Some(m) if m.role == Role::Assistant => &m.tool_calls,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(c: &[Message]) -> Vec<&str> {
        c.iter().map(|m| m.id.as_deref().unwrap_or("")).collect()
    }

    #[test]
    fn append_replace_and_remove_by_id() {
        let mut c = Vec::new();
        add_messages(
            &mut c,
            vec![Message::system("s"), Message::user("u").with_id("q")],
        );
        assert_eq!(ids(&c), ["m0", "q"]);
        add_messages(&mut c, vec![Message::remove("m0"), Message::assistant("a")]);
        assert_eq!(ids(&c), ["q", "m1"]);
        // A removed position's name is not reused while another message holds it.
        add_messages(&mut c, vec![Message::user("again")]);
        assert_eq!(ids(&c), ["q", "m1", "m2"]);
        add_messages(&mut c, vec![Message::user("edited").with_id("q")]);
        assert_eq!((c[0].content.as_str(), c.len()), ("edited", 3));
        add_messages(&mut c, vec![Message::remove("nope")]);
        assert_eq!(c.len(), 3);
        assert!(c.iter().all(|m| !m.remove));
    }

    #[test]
    fn the_same_writes_give_the_same_ids() {
        let run = || {
            let mut c = Vec::new();
            for k in 0..5 {
                add_messages(&mut c, vec![Message::user(format!("{k}"))]);
                if k == 2 {
                    add_messages(&mut c, vec![Message::remove("m1")]);
                }
            }
            c
        };
        assert_eq!(run(), run());
        let c = run();
        let mut unique = ids(&c);
        unique.dedup();
        assert_eq!(unique.len(), c.len());
    }
}
