mod histograms;
mod lifecycle_latency;
#[cfg(test)]
mod lifecycle_latency_test;

pub use self::histograms::LogStageHistograms;
pub use self::lifecycle_latency::LogStages;
