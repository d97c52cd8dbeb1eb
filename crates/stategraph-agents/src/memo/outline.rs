//! The memo's fixed shape: the 13 stages, the research topics and the 10 sections.

/// The stages in the order they run; progress says "stage k of 13".
pub const STAGES: [&str; 13] = [
    "deck_analyst",
    "research",
    "section_research",
    "draft",
    "enrich_trademark",
    "enrich_socials",
    "enrich_links",
    "enrich_visualizations",
    "cite",
    "validate_citations",
    "fact_check",
    "validate",
    "finalize",
];

/// 1-based position of `stage` in [`STAGES`].
pub fn stage_number(stage: &str) -> usize {
    STAGES.iter().position(|s| *s == stage).map_or(0, |i| i + 1)
}

/// A company-level research topic (`1-research.json`).
pub struct TopicSpec {
    /// Its name.
    pub name: &'static str,
    /// What is searched; `{company}` is filled in.
    pub query: &'static str,
}

/// The research topics, in order.
pub const TOPICS: [TopicSpec; 6] = [
    TopicSpec {
        name: "market",
        query: "market size electricity spend growth facilities",
    },
    TopicSpec {
        name: "customers",
        query: "customers measured energy savings payback renew",
    },
    TopicSpec {
        name: "team",
        query: "founder chief executive technology officer years experience",
    },
    TopicSpec {
        name: "competition",
        query: "competitor controllers dashboards competitive risk",
    },
    TopicSpec {
        name: "financials",
        query: "ARR revenue retention gross margin burn runway cash",
    },
    TopicSpec {
        name: "risks",
        query: "risk single contract manufacturer largest customer sales cycle",
    },
];

/// One section of the memo.
pub struct SectionSpec {
    /// File slug: `NN-slug.md`.
    pub slug: &'static str,
    /// Heading.
    pub title: &'static str,
    /// What its evidence is searched with.
    pub query: &'static str,
    /// The research topic whose summary opens it, if any.
    pub topic: Option<&'static str>,
    /// What the section must cover (for the model, and for a reader of the outline).
    pub brief: &'static str,
}

/// The 10 sections, in memo order.
pub const SECTIONS: [SectionSpec; 10] = [
    SectionSpec {
        slug: "executive-summary",
        title: "Executive Summary",
        query: "raise pre-money valuation ARR customers tagline",
        topic: None,
        brief: "the company, the round, the headline traction and the recommendation in brief",
    },
    SectionSpec {
        slug: "company-overview",
        title: "Company Overview",
        query: "founded headquarters product sensors cloud install",
        topic: None,
        brief: "what the company does, where, since when, and how the product works",
    },
    SectionSpec {
        slug: "market-opportunity",
        title: "Market Opportunity",
        query: "cold-storage electricity spend market capacity tariffs",
        topic: Some("market"),
        brief: "market size, growth and what drives adoption",
    },
    SectionSpec {
        slug: "team",
        title: "Team",
        query: "founder CEO CTO VP Sales years experience patents",
        topic: Some("team"),
        brief: "the founders and leaders, their relevant experience, gaps",
    },
    SectionSpec {
        slug: "product-technology",
        title: "Product and Technology",
        query: "sensors setpoints controller forecasts compressor install",
        topic: None,
        brief: "the product, how it creates savings, defensibility",
    },
    SectionSpec {
        slug: "traction",
        title: "Traction",
        query: "ARR customers sites measured energy savings payback",
        topic: Some("customers"),
        brief: "revenue, customers, growth and what customers say",
    },
    SectionSpec {
        slug: "business-model",
        title: "Business Model",
        query: "hardware fee subscription per site agreements gross margin",
        topic: None,
        brief: "pricing, contract terms and unit economics",
    },
    SectionSpec {
        slug: "competition",
        title: "Competition",
        query: "Glacio VoltKeep competitor dashboards controllers",
        topic: Some("competition"),
        brief: "competitors, differentiation and competitive risk",
    },
    SectionSpec {
        slug: "financials-and-terms",
        title: "Financials and Terms",
        query: "burn cash runway round valuation liquidation preference board",
        topic: Some("financials"),
        brief: "burn, runway, the round's terms and the use of funds",
    },
    SectionSpec {
        slug: "risks-and-recommendation",
        title: "Risks and Recommendation",
        query: "risk single contract manufacturer largest customer sales cycle",
        topic: Some("risks"),
        brief: "the main risks, what would mitigate them, and the recommendation",
    },
];
